#include "base/subprocess.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

std::string TempDir() { return getenv("TEST_TMPDIR"); }

std::string Contents(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

TEST(SubprocessTest, RunsWithoutAShellAndCapturesOutput) {
  std::string output = TempDir() + "/out";
  absl::StatusOr<ProcessResult> result =
      RunProcess({"echo", "a;b", "$HOME"}, TempDir(), output, std::chrono::seconds(10));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(Contents(output), "a;b $HOME\n") << "arguments must reach argv untouched";
}

TEST(SubprocessTest, ReportsExitCodeAndWorkingDirectory) {
  std::string output = TempDir() + "/pwd";
  absl::StatusOr<ProcessResult> result =
      RunProcess({"sh", "-c", "pwd; exit 3"}, "/", output, std::chrono::seconds(10));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(Contents(output), "/\n");
}

TEST(SubprocessTest, KillsAtTheTimeLimit) {
  absl::StatusOr<ProcessResult> result =
      RunProcess({"sleep", "30"}, TempDir(), TempDir() + "/sleep", std::chrono::milliseconds(100));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(SubprocessTest, MissingProgramIsNotFound) {
  EXPECT_EQ(RunProcess({"no-such-program-gpucmd"}, TempDir(), TempDir() + "/x",
                       std::chrono::seconds(1))
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpucmd
