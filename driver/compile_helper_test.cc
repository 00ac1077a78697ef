// A GPU driver's compile helper (Note [Compile helper] in driver/compile_helper.h),
// run by the daemon's code as the daemon runs it, after the kernel front end: it builds
// the kernel suite, and hostile source gets neither files nor unbounded time. Built once
// per helper: the environment names the helper (COMPILE_HELPER), its target
// (COMPILE_TARGET) and the front end (KERNEL_FRONT_END).

#include "driver/compile_helper.h"

#include <dirent.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/kernel_sources.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string OutputPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR")) + "/" + name;
}

CompileHelper Helper(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  return {.path = std::filesystem::absolute(getenv("COMPILE_HELPER")).string(),
          .limits = {.timeout = timeout}};
}

absl::StatusOr<CompileOutput> Compile(const std::string& source, const std::string& entry,
                                      const CompileHelper& helper = Helper()) {
  const CompileHelper front_end{
      .path = std::filesystem::absolute(getenv("KERNEL_FRONT_END")).string()};
  return CompileWithHelper(front_end, helper, source, entry, {}, getenv("COMPILE_TARGET"),
                           OutputPath(entry + ".image"));
}

// Processes whose command line mentions `text`.
int ProcessesMentioning(const std::string& text) {
  int count = 0;
  DIR* proc = opendir("/proc");
  while (dirent* entry = readdir(proc)) {
    std::stringstream command_line;
    command_line << std::ifstream(std::string("/proc/") + entry->d_name + "/cmdline").rdbuf();
    if (command_line.str().find(text) != std::string::npos) ++count;
  }
  closedir(proc);
  return count;
}

TEST(CompileHelperTest, BuildsTheKernelSuite) {
  for (const auto& [entry, source] : kernels::kSuite) {
    absl::StatusOr<CompileOutput> output = Compile(source, entry);
    ASSERT_TRUE(output.ok()) << entry << ": " << output.status();
    EXPECT_FALSE(output->params.empty()) << entry;
    std::stringstream image;
    image << std::ifstream(OutputPath(std::string(entry) + ".image"), std::ios::binary).rdbuf();
    EXPECT_THAT(image.str(), HasSubstr(entry)) << "entry point missing from the image";
  }
}

TEST(CompileHelperTest, CompileErrorsCarryTheLog) {
  absl::Status status =
      Compile("extern \"C\" __global__ void k(float* x) { x[0] = nope; }", "k").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("nope"));
}

TEST(CompileHelperTest, IncludesCannotReadFilesOutsideTheSystemsSoftware) {
  for (const char* header : {"/etc/passwd", "../../../../../../etc/passwd", "/proc/self/environ"}) {
    absl::Status status = Compile(std::string("#include \"") + header + "\"\n" +
                                      "extern \"C\" __global__ void k(float* x) {}\n",
                                  "k")
                              .status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << header << ": " << status;
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr("root:"))) << header;
  }
}

TEST(CompileHelperTest, ATimeBombStopsAtTheLimitAndLeavesNoProcess) {
  const std::string marker = "gpucmd_time_bomb_" + std::to_string(getpid());
  absl::Status status =
      Compile(R"(
      #define X1 a + a + a + a + a + a + a + a + a + a
      #define X2 X1 + X1 + X1 + X1 + X1 + X1 + X1 + X1 + X1 + X1
      #define X3 X2 + X2 + X2 + X2 + X2 + X2 + X2 + X2 + X2 + X2
      #define X4 X3 + X3 + X3 + X3 + X3 + X3 + X3 + X3 + X3 + X3
      #define X5 X4 + X4 + X4 + X4 + X4 + X4 + X4 + X4 + X4 + X4
      #define X6 X5 + X5 + X5 + X5 + X5 + X5 + X5 + X5 + X5 + X5
      #define X7 X6 + X6 + X6 + X6 + X6 + X6 + X6 + X6 + X6 + X6
      #define X8 X7 + X7 + X7 + X7 + X7 + X7 + X7 + X7 + X7 + X7
      #define X9 X8 + X8 + X8 + X8 + X8 + X8 + X8 + X8 + X8 + X8
      extern "C" __global__ void )" + marker + R"((unsigned long long* out) {
        unsigned long long a = out[0];
        out[0] = X9;  // a billion terms
      })",
              marker, Helper(std::chrono::seconds(3)))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("limit"));
  EXPECT_EQ(ProcessesMentioning(marker), 0) << "a compile process outlived its time limit";
}

}  // namespace
}  // namespace gpucmd
