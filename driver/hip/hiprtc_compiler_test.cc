// Compiles the kernel test suite with hiprtc for gfx90a (no GPU needed) and checks the
// code objects hold the entry points.

#include "driver/hip/hiprtc_compiler.h"

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/kernel_sources.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

std::string OutputPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(HiprtcCompilerTest, BuildsTheKernelSuiteForGfx90a) {
  for (const auto& [entry, source] : kernels::kSuite) {
    std::string path = OutputPath(std::string(entry) + ".hsaco");
    absl::StatusOr<std::string> output =
        CompileWithHiprtc(source, entry, {}, "gfx90a", path, 64 << 10);
    EXPECT_TRUE(output.ok()) << entry << ": " << output.status();
    if (!output.ok()) continue;
    std::stringstream code;
    code << std::ifstream(path, std::ios::binary).rdbuf();
    EXPECT_THAT(code.str(), HasSubstr(entry)) << "entry point missing from the code object";
  }
}

// Of what the kernel front end refuses as host code, hiprtc refuses what device code uses.
TEST(HiprtcCompilerTest, RefusesHostCodeThatDeviceCodeUses) {
  for (const kernels::HostCode& c : kernels::kHostCode) {
    if (c.hiprtc == kernels::Hiprtc::kAborts) continue;  // the front end keeps it from hiprtc
    absl::Status status =
        CompileWithHiprtc(c.source, "k", {}, "gfx90a", OutputPath("host_code.hsaco"), 64 << 10)
            .status();
    if (c.hiprtc == kernels::Hiprtc::kRefuses) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.source;
    } else {
      EXPECT_TRUE(status.ok()) << c.source << ": " << status;
    }
  }
}

TEST(HiprtcCompilerTest, CompileErrorsCarryTheLog) {
  absl::Status status =
      CompileWithHiprtc("extern \"C\" __global__ void k(float* x) { x[0] = nope; }", "k", {},
                        "gfx90a", OutputPath("broken.hsaco"), 64 << 10)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("nope"));
}

}  // namespace
}  // namespace gpucmd
