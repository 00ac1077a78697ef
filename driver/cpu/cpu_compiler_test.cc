#include "driver/cpu/cpu_compiler.h"

#include <dlfcn.h>

#include "driver/cpu/kernel_abi.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

std::string OutputPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR")) + "/" + name + ".so";
}

constexpr char kVectorAdd[] = R"(
  __device__ float twice(float x) { return 2.0f * x; }
  extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + twice(b[i]) * SCALE;
  }
)";

TEST(CpuCompilerTest, BuildsAModuleThatRunsAsTheAbiSays) {
  std::string path = OutputPath("vector_add");
  absl::StatusOr<CompileOutput> output =
      CompileCpuKernel(kVectorAdd, "vector_add", {"-DSCALE=3"}, path, {});
  ASSERT_TRUE(output.ok()) << output.status();
  ASSERT_EQ(output->params.size(), 4u);
  EXPECT_EQ(output->params[2].kind, ParamKind::kBuffer);

  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(module, nullptr) << dlerror();
  EXPECT_EQ(*static_cast<const int*>(dlsym(module, "gpucmd_abi_version")), kKernelAbiVersion);
  EXPECT_EQ(*static_cast<const int*>(dlsym(module, "gpucmd_uses_barrier")), 0);
  auto bind = reinterpret_cast<void (*)(KernelThreadContext*)>(dlsym(module, "gpucmd_bind"));
  auto entry = reinterpret_cast<void (*)(void**)>(dlsym(module, "gpucmd_entry"));
  ASSERT_TRUE(bind && entry);

  float a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 1, 1, 1, 1}, out[5] = {};
  uint64_t slots[4] = {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b),
                       reinterpret_cast<uint64_t>(out), 5};
  void* args[4] = {&slots[0], &slots[1], &slots[2], &slots[3]};
  KernelThreadContext context{};
  context.block_dim = {4, 1, 1};
  context.grid_dim = {2, 1, 1};
  for (unsigned block = 0; block < 2; ++block) {
    for (unsigned thread = 0; thread < 4; ++thread) {
      context.block_idx = {block, 0, 0};
      context.thread_idx = {thread, 0, 0};
      bind(&context);
      entry(args);
    }
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], a[i] + 6.0f) << i;
  dlclose(module);
}

TEST(CpuCompilerTest, CompileErrorsReturnTheLog) {
  absl::Status status =
      CompileCpuKernel("extern \"C\" __global__ void k(int n) { undeclared_thing(n); }", "k", {},
                       OutputPath("broken"), {})
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("undeclared_thing"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("kernel.cu:1"));
}

TEST(CpuCompilerTest, UnsupportedFeaturesAreNamed) {
  struct Case {
    const char* body;
    const char* feature;
    const char* where;  // the client's line
  };
  for (const Case& c :
       {Case{"\n__managed__ int* p = nullptr;", "managed memory", "kernel.cu:2"},
        Case{"\n\nother<<<1, 1>>>(n);", "dynamic parallelism", "kernel.cu:3"},
        Case{"asm volatile(\"membar.gl;\");", "inline PTX", "kernel.cu:1"},
        Case{"float t = tex2D<float>(0, 0, 0);", "textures", "kernel.cu:1"}}) {
    std::string source = std::string("extern \"C\" __global__ void k(int n) { ") + c.body + " }";
    absl::Status status = CompileCpuKernel(source, "k", {}, OutputPath("unsupported"), {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.feature));
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.where)) << status;
  }
}

// Load-time code and inline assembly are refused on what the compiler made, whatever
// the spelling (driver/cpu/module_checks.h); what merely looks similar compiles.
TEST(CpuCompilerTest, LoadTimeCodeAndAssemblyAreRefusedInAnySpelling) {
  for (const char* refused :
       {"__attribute__((constructor)) static __device__ void f() { puts(\"loaded\"); }",
        "struct Global { __device__ Global(); }; static __device__ Global global;\n"
        "static __device__ void f() {}",
        "#define CAT(a, b) a##b\n"
        "static __device__ void f() { CAT(__as, m__) volatile(\"nop\"); }",
        "# 1 \"/usr/include/stdio.h\" 3\n"
        "static __device__ void f() { __asm volatile(\"nop\"); }",
        "asm(\".globl smuggled\"); static __device__ void f() {}"}) {
    std::string source = std::string("extern \"C\" __device__ int puts(const char*);\n") + refused +
                         "\nextern \"C\" __global__ void k(int n) { f(); }";
    absl::Status status = CompileCpuKernel(source, "k", {}, OutputPath("refused"), {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << refused;
    // Refused for what the compiler made, not as host code.
    EXPECT_THAT(std::string(status.message()), HasSubstr("the CPU driver does not")) << refused;
  }
  std::string path = OutputPath("local-static");
  ASSERT_TRUE(CompileCpuKernel(R"(
      #include <math.h>
      struct Counter { int n = 0; __device__ ~Counter() {} };
      extern "C" __global__ void k(int* out) {
        static Counter counter;  // initialised on first use, not at load
        out[0] = ++counter.n + (int)sqrtf(4.0f);
        const char* text = "asm";  // a string is not assembly
        out[1] = text[0];
      })",
                               "k", {}, path, {})
                  .ok());
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(module, nullptr) << dlerror();
  dlclose(module);
}

TEST(CpuCompilerTest, OptionsAreCheckedAndBarrierKernelsFlagged) {
  EXPECT_EQ(CompileCpuKernel(kVectorAdd, "vector_add", {"-arch=sm_90"}, OutputPath("arch"), {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CompileCpuKernel(kVectorAdd, "vector_add", {"-DSCALE=1", "-O3", "--use_fast_math"},
                               OutputPath("fast"), {})
                  .ok());
  std::string path = OutputPath("barrier");
  ASSERT_TRUE(CompileCpuKernel(R"(
      extern "C" __global__ void k(float* data) {
        extern __shared__ float scratch[];
        __shared__ int flag;
        scratch[threadIdx.x] = data[threadIdx.x];
        __syncthreads();
        data[threadIdx.x] = scratch[blockDim.x - 1 - threadIdx.x] + flag * 0;
      })",
                               "k", {}, path, {})
                  .ok());
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(module, nullptr) << dlerror();
  EXPECT_EQ(*static_cast<const int*>(dlsym(module, "gpucmd_uses_barrier")), 1);
  dlclose(module);
}

TEST(CpuCompilerTest, MissingCompilerIsAClearError) {
  CpuCompilerOptions options;
  options.compiler = "no-such-compiler-gpucmd";
  absl::Status status =
      CompileCpuKernel("extern \"C\" __global__ void k() {}", "k", {}, OutputPath("none"), options)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("install g++"));
}

}  // namespace
}  // namespace gpucmd
