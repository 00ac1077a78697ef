#include "base/file.h"

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

}  // namespace
}  // namespace gpucmd
