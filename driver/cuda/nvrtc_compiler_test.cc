// Compiles the kernel test suite with NVRTC for sm_90 (no GPU needed) and checks the
// CUBINs hold the entry points.

#include "driver/cuda/nvrtc_compiler.h"

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

std::string Contents(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path, std::ios::binary).rdbuf();
  return text.str();
}

TEST(NvrtcCompilerTest, KnowsHopper) {
  std::vector<int> architectures = NvrtcSupportedArchitectures();
  EXPECT_THAT(architectures, ::testing::Contains(90));
}

TEST(NvrtcCompilerTest, BuildsTheKernelSuiteForSm90) {
  for (const auto& [entry, source] : kernels::kSuite) {
    std::string path = OutputPath(std::string(entry) + ".cubin");
    bool ptx = true;
    absl::StatusOr<std::string> output = CompileWithNvrtc(source, entry, {}, 90, path, {}, &ptx);
    ASSERT_TRUE(output.ok()) << entry << ": " << output.status();
    EXPECT_FALSE(ptx);
    std::string cubin = Contents(path);
    ASSERT_GT(cubin.size(), 4u);
    EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF") << entry << " is not a CUBIN";
    EXPECT_THAT(cubin, HasSubstr(entry)) << "entry point missing from the CUBIN";
  }
}

TEST(NvrtcCompilerTest, UnknownArchitectureFallsBackToPtx) {
  bool ptx = false;
  std::string path = OutputPath("future.ptx");
  absl::StatusOr<std::string> output =
      CompileWithNvrtc(kernels::kVectorAdd, "vector_add", {}, 999, path, {}, &ptx);
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_TRUE(ptx);
  std::string text = Contents(path);
  EXPECT_THAT(text, HasSubstr(".entry vector_add"));
}

// What the kernel front end refuses as host code, NVRTC refuses too (in its JIT mode, which
// refuses host code that no device code uses).
TEST(NvrtcCompilerTest, RefusesHostCode) {
  if (CompileWithNvrtc("int unused(int x) { return x; }\n"
                       "extern \"C\" __global__ void k(int* d) { d[0] = 1; }",
                       "k", {}, 90, OutputPath("jit_mode.cubin"), {}, nullptr)
          .ok()) {
    GTEST_SKIP() << "this NVRTC has no JIT mode: it takes host code no device code uses";
  }
  for (const kernels::HostCode& c : kernels::kHostCode) {
    absl::Status status =
        CompileWithNvrtc(c.source, "k", {}, 90, OutputPath("host_code.cubin"), {}, nullptr)
            .status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.source;
    EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("kernel.cu(", c.line, ")")))
        << c.source;
  }
}

// CUDA that the CPU driver runs and hiprtc lacks (kernel_test checks the results).
TEST(NvrtcCompilerTest, BuildsWhatHiprtcLacks) {
  for (const auto& [entry, source] : kernels::kBeyondHiprtc) {
    absl::StatusOr<std::string> built = CompileWithNvrtc(
        source, entry, {}, 90, OutputPath(absl::StrCat(entry, ".cubin")), {}, nullptr);
    EXPECT_TRUE(built.ok()) << entry << ": " << built.status();
  }
}

TEST(NvrtcCompilerTest, CompileErrorsCarryTheLog) {
  absl::Status status =
      CompileWithNvrtc("extern \"C\" __global__ void k(float* x) { x[0] = nope; }", "k", {}, 90,
                       OutputPath("broken.cubin"), {}, nullptr)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("nope"));
  EXPECT_EQ(CompileWithNvrtc(kernels::kVectorAdd, "vector_add", {"-arch=sm_90"}, 90,
                             OutputPath("option.cubin"), {}, nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpucmd
