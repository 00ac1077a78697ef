#include "base/file.h"

#include <sys/stat.h>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

std::string TempPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(FileTest, WrittenBytesReadBackExactly) {
  std::string path = TempPath("data.bin");
  std::string contents("a\0b\n\xff", 5);
  ASSERT_TRUE(WriteFileAtomically(path, contents).ok());
  EXPECT_EQ(ReadFileOrEmpty(path), contents);
  ASSERT_TRUE(WriteFileAtomically(path, "replaced").ok());
  EXPECT_EQ(ReadFileOrEmpty(path), "replaced");
}

TEST(FileTest, FailuresAreReported) {
  EXPECT_EQ(ReadFileOrEmpty(TempPath("missing")), "");
  EXPECT_EQ(WriteFileAtomically("/nonexistent-dir/x", "y").code(), absl::StatusCode::kInternal);
}

TEST(FileTest, ARegularFileReadsWhole) {
  const std::string path = TempPath("small.txt");
  ASSERT_TRUE(WriteFileAtomically(path, std::string(100000, 'x')).ok());
  absl::StatusOr<std::string> read = ReadRegularFile(path, 100000);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, std::string(100000, 'x'));
}

TEST(FileTest, OnlyRegularFilesWithinTheLimitAreRead) {
  const std::string path = TempPath("large.txt");
  ASSERT_TRUE(WriteFileAtomically(path, std::string(1001, 'x')).ok());
  absl::StatusOr<std::string> large = ReadRegularFile(path, 1000);
  EXPECT_EQ(large.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(large.status().message().find("more than 1000 bytes"), std::string::npos);
  const std::string fifo = TempPath("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Each would otherwise be read as empty, wait for a writer, or never end.
  for (const std::string& other : {std::string(getenv("TEST_TMPDIR")), fifo,
                                   std::string("/dev/zero"), std::string("/dev/null")}) {
    absl::StatusOr<std::string> read = ReadRegularFile(other, 1 << 20);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << other;
    EXPECT_NE(read.status().message().find("not a regular file"), std::string::npos) << other;
  }
  EXPECT_EQ(ReadRegularFile(TempPath("missing"), 10).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpucmd
