#include "base/subprocess.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/process_census.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::NoProcessMatches;

std::string TempDir() { return getenv("TEST_TMPDIR"); }

std::string Contents(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

TEST(SubprocessTest, RunsWithoutAShellAndCapturesOutput) {
  std::string output = TempDir() + "/out";
  absl::StatusOr<ProcessResult> result =
      RunProcess({"echo", "a;b", "$HOME"}, TempDir(), output, {.timeout = std::chrono::seconds(10)});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(Contents(output), "a;b $HOME\n") << "arguments must reach argv untouched";
}

TEST(SubprocessTest, ReportsExitCodeAndWorkingDirectory) {
  std::string output = TempDir() + "/pwd";
  absl::StatusOr<ProcessResult> result =
      RunProcess({"sh", "-c", "pwd; exit 3"}, "/", output, {.timeout = std::chrono::seconds(10)});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(Contents(output), "/\n");
}

// A sleep of `seconds` and a fraction no other process picks (this test's process id),
// so that NoProcessMatches finds only what this test started.
std::string UniqueSleep(int seconds) { return absl::StrCat("sleep ", seconds, ".", getpid()); }

TEST(SubprocessTest, KillsTheWholeProcessGroupAtTheTimeLimit) {
  // The shell starts a grandchild and waits: killing only the shell would leave it.
  const std::string sleep = UniqueSleep(31);
  absl::StatusOr<ProcessResult> result =
      RunProcess({"sh", "-c", sleep + " & wait"}, TempDir(), TempDir() + "/sleep",
                 {.timeout = std::chrono::milliseconds(200)});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(result.status().message().find("time limit"), absl::string_view::npos);
  EXPECT_TRUE(NoProcessMatches(sleep)) << "the grandchild outlived the time limit";
}

TEST(SubprocessTest, NothingItStartedOutlivesIt) {
  const std::string sleep = UniqueSleep(32);
  absl::StatusOr<ProcessResult> result =
      RunProcess({"sh", "-c", sleep + " & exit 0"}, TempDir(), TempDir() + "/detached",
                 {.timeout = std::chrono::seconds(10)});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(NoProcessMatches(sleep));
}

TEST(SubprocessTest, AddressSpaceLimitHolds) {
  std::string output = TempDir() + "/big";
  // head allocates its buffer for 512 MiB of lines: refused under a 64 MiB limit.
  absl::StatusOr<ProcessResult> result =
      RunProcess({"sh", "-c", "head -c 600000000 /dev/zero | tr '\\0' x | sort > /dev/null"},
                 TempDir(), output,
                 {.timeout = std::chrono::seconds(20), .address_space_bytes = 64 << 20});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NE(result->exit_code, 0) << Contents(output);
}

TEST(SubprocessTest, MissingProgramIsNotFound) {
  EXPECT_EQ(RunProcess({"no-such-program-gpucmd"}, TempDir(), TempDir() + "/x",
                       {.timeout = std::chrono::seconds(1)})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpucmd
