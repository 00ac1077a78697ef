#include "base/sandbox.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/subprocess.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

std::string TempDir() { return getenv("TEST_TMPDIR"); }

std::string Contents(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// Runs `script` with /bin/sh inside a sandbox that may read and run the system's
// programs and write only `writable`.
absl::StatusOr<ProcessResult> RunConfined(const std::string& script, const std::string& writable,
                                          const std::string& output) {
  absl::StatusOr<Sandbox> sandbox = Sandbox::Prepare(
      {.executable = {"/usr", "/bin", "/lib", "/lib64"}, .read_write = {writable}});
  if (!sandbox.ok()) return sandbox.status();
  return RunProcess({"/bin/sh", "-c", script}, writable, output,
                    {.timeout = std::chrono::seconds(20), .sandbox = &*sandbox});
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (LandlockAbi() < 1) GTEST_SKIP() << "this kernel has no Landlock";
  }
};

TEST_F(SandboxTest, FilesOutsideThePolicyCannotBeReadOrWritten) {
  std::string box = TempDir() + "/box";
  std::filesystem::create_directories(box);
  std::string outside = TempDir() + "/outside";
  std::ofstream(outside) << "secret";
  std::string output = TempDir() + "/confined.log";
  absl::StatusOr<ProcessResult> result = RunConfined(
      "cat /etc/passwd; echo status=$?; cat " + outside + "; echo status=$?; "
      "echo x > " + outside + ".new; echo status=$?; echo inside > inside; echo status=$?",
      box, output);
  ASSERT_TRUE(result.ok()) << result.status();
  std::string log = Contents(output);
  EXPECT_EQ(log.find("root:"), std::string::npos) << log;
  EXPECT_EQ(log.find("secret"), std::string::npos) << log;
  EXPECT_NE(log.find("/etc/passwd: Permission denied"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(outside + ".new"));
  EXPECT_EQ(Contents(box + "/inside"), "inside\n") << "its own directory stays writable";
}

TEST_F(SandboxTest, SignalsToProcessesOutsideAreRefused) {
  if (LandlockAbi() < 6) GTEST_SKIP() << "signal scoping needs Landlock ABI 6";
  std::string box = TempDir() + "/signals";
  std::filesystem::create_directories(box);
  std::string output = TempDir() + "/signals.log";
  // The test process is outside the sandbox: signal 0 only checks permission.
  absl::StatusOr<ProcessResult> result =
      RunConfined("kill -0 " + std::to_string(getpid()) + "; echo status=$?", box, output);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NE(Contents(output).find("status=1"), std::string::npos) << Contents(output);
}

}  // namespace
}  // namespace gpucmd
