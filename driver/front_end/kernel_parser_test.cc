#include "driver/front_end/kernel_parser.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/kernel_sources.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

std::vector<ParamKind> KindsOf(const std::vector<KernelParam>& params) {
  std::vector<ParamKind> kinds;
  for (const KernelParam& param : params) kinds.push_back(param.kind);
  return kinds;
}

std::vector<ScalarKind> ScalarsOf(const std::vector<KernelParam>& params) {
  std::vector<ScalarKind> scalars;
  for (const KernelParam& param : params) scalars.push_back(param.scalar);
  return scalars;
}

TEST(KernelParserTest, ClassifiesParametersByCanonicalType) {
  absl::StatusOr<ParsedKernel> parsed = ParseKernel(R"(
    typedef unsigned int uint;
    typedef unsigned char uchar;
    using Index = long long;
    typedef float real;
    __device__ float helper(float x) { return x; }
    // extern "C" __global__ void saxpy(int wrong);
    extern "C" __global__ void saxpy(int n, real a, const float* __restrict__ x, uchar4 *y,
                                     unsigned long long count, double d, uint u, Index i,
                                     size_t bytes, int64_t signed64, uchar* raw) {}
  )", "saxpy", {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(KindsOf(parsed->params),
              ::testing::ElementsAre(ParamKind::kScalar, ParamKind::kScalar, ParamKind::kBuffer,
                                     ParamKind::kBuffer, ParamKind::kScalar, ParamKind::kScalar,
                                     ParamKind::kScalar, ParamKind::kScalar, ParamKind::kScalar,
                                     ParamKind::kScalar, ParamKind::kBuffer));
  EXPECT_THAT(ScalarsOf(parsed->params),
              ::testing::ElementsAre(ScalarKind::kI32, ScalarKind::kF32, ScalarKind::kNone,
                                     ScalarKind::kNone, ScalarKind::kU64, ScalarKind::kF64,
                                     ScalarKind::kU32, ScalarKind::kI64, ScalarKind::kU64,
                                     ScalarKind::kI64, ScalarKind::kNone));
  EXPECT_THAT(parsed->params[1].declared_type, HasSubstr("real a"));
  EXPECT_TRUE(parsed->params[2].read_only) << "const float*";
  EXPECT_FALSE(parsed->params[3].read_only) << "uchar4*";
  EXPECT_FALSE(parsed->threads_meet);
  EXPECT_TRUE(parsed->dynamic_shared.empty());
  EXPECT_TRUE(parsed->unsupported.empty());
}

TEST(KernelParserTest, LaunchBoundsDefaultArgumentsAndTemplateWrappers) {
  const char* source = R"(
    template <typename T, int kScale>
    __device__ void scale(T* data, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) data[i] *= kScale;
    }
    extern "C" __global__ void __launch_bounds__(256) scale_float(float* d, int n = 4) {
      scale<float, 2>(d, n);
    }
    extern "C" __launch_bounds__(128, 2) __global__ void scale_int(int* d, int n) {
      scale<int, 3>(d, n);
    }
    extern "C" {
    __global__ void in_block(const CUtensorMap map, double* out) {}
    }
  )";
  for (const char* entry : {"scale_float", "scale_int"}) {
    absl::StatusOr<ParsedKernel> parsed = ParseKernel(source, entry, {});
    ASSERT_TRUE(parsed.ok()) << entry << ": " << parsed.status();
    EXPECT_THAT(KindsOf(parsed->params),
                ::testing::ElementsAre(ParamKind::kBuffer, ParamKind::kScalar));
  }
  absl::StatusOr<ParsedKernel> in_block = ParseKernel(source, "in_block", {});
  ASSERT_TRUE(in_block.ok()) << in_block.status();
  EXPECT_THAT(KindsOf(in_block->params),
              ::testing::ElementsAre(ParamKind::kTensorMap, ParamKind::kBuffer));
}

TEST(KernelParserTest, ClientDefinesShapeTheParse) {
  const char* source = R"(
    #ifdef USE_DOUBLE
    typedef double value_t;
    #else
    typedef float value_t;
    #endif
    extern "C" __global__ void k(value_t x) {}
  )";
  EXPECT_EQ(ParseKernel(source, "k", {})->params[0].scalar, ScalarKind::kF32);
  EXPECT_EQ(ParseKernel(source, "k", {"-DUSE_DOUBLE"})->params[0].scalar, ScalarKind::kF64);
}

TEST(KernelParserTest, FindsDynamicSharedDeclarationsByTheirRanges) {
  const std::string source = R"(
    // extern __shared__ float in_a_comment[];
    extern __shared__ float file_scope[];
    extern "C" __global__ void k(float* out) {
      extern __shared__ __align__(16) unsigned char raw[];
      extern int __shared__ other_order[];
      const char* text = "extern __shared__ float in_a_string[];";
      float file_scope_copy = file_scope[0];
      out[0] = file_scope_copy + raw[0] + other_order[0] + text[0];
    }
  )";
  absl::StatusOr<ParsedKernel> parsed = ParseKernel(source, "k", {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->dynamic_shared.size(), 3u);
  const DynamicSharedArray& file_scope = parsed->dynamic_shared[0];
  EXPECT_EQ(file_scope.name, "file_scope");
  EXPECT_EQ(file_scope.element_type, "float");
  EXPECT_FALSE(file_scope.in_function);
  EXPECT_EQ(source.substr(file_scope.begin, file_scope.end - file_scope.begin),
            "extern __shared__ float file_scope[]");
  const DynamicSharedArray& raw = parsed->dynamic_shared[1];
  EXPECT_EQ(raw.element_type, "unsigned char");
  EXPECT_TRUE(raw.in_function);
  EXPECT_EQ(source.substr(raw.begin, raw.end - raw.begin),
            "extern __shared__ __align__(16) unsigned char raw[]");
  const DynamicSharedArray& other_order = parsed->dynamic_shared[2];
  EXPECT_EQ(other_order.element_type, "int");
  EXPECT_EQ(source.substr(other_order.begin, other_order.end - other_order.begin),
            "extern int __shared__ other_order[]");
}

TEST(KernelParserTest, DynamicSharedOfTemplateType) {
  const std::string source = R"(
    template <typename T>
    __device__ T first(const T* in) {
      extern __shared__ T staged[];
      staged[threadIdx.x] = in[threadIdx.x];
      return staged[0];
    }
    extern "C" __global__ void k(const int* in, int* out) { out[0] = first(in); }
  )";
  absl::StatusOr<ParsedKernel> parsed = ParseKernel(source, "k", {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->dynamic_shared.size(), 1u);
  EXPECT_EQ(parsed->dynamic_shared[0].element_type, "T");
}

TEST(KernelParserTest, SizedExternSharedIsRefused) {
  absl::Status status = ParseKernel(R"(
    extern "C" __global__ void k(float* out) {
      extern __shared__ float sized[64];
      out[0] = sized[0];
    }
  )", "k", {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("kernel.cu:3:"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("array of unknown size"));
}

TEST(KernelParserTest, ThreadsMeetOnlyAtBarriersAndWarpPrimitives) {
  struct Case {
    const char* body;
    bool meets;
  };
  for (const Case& c : {
           Case{"out[threadIdx.x] = 1.0f;", false},
           Case{"int __syncthreads_count_like = 0; out[0] = __syncthreads_count_like;", false},
           Case{"out[0] = 1; __syncthreads();", true},
           Case{"out[0] = __shfl_down_sync(0xffffffffu, out[0], 1);", true},
           Case{"out[0] = __ballot_sync(__activemask(), 1);", true},
           Case{"namespace cg = cooperative_groups; cg::this_thread_block().sync();", true},
           // CUB's collectives meet inside their headers.
           Case{"__shared__ cub::BlockReduce<float, 64>::TempStorage t;\n"
                "out[0] = cub::BlockReduce<float, 64>(t).Sum(out[threadIdx.x]);",
                true},
           Case{"int k[2] = {1, 2}; cub::BlockMergeSort<int, 64, 2>().Sort(k, Less());", true},
           Case{"out[0] = helper_that_syncs();", true},
           // A shuffle whose overload depends on the template's type.
           Case{"out[0] = shuffled_in_template(out[0]);", true},
       }) {
    const std::string source = absl::StrCat(
        "#include <cooperative_groups.h>\n"
        "#include <cub/block/block_merge_sort.cuh>\n"
        "#include <cub/block/block_reduce.cuh>\n"
        "struct Less { __device__ bool operator()(int a, int b) const { return a < b; } };\n"
        "__device__ float helper_that_syncs() { __syncwarp(); return 0; }\n"
        "template <typename T> __device__ T shuffled_in_template(T v) {\n"
        "  return __shfl_xor_sync(0xffffffffu, v, 1);\n"
        "}\n"
        "extern \"C\" __global__ void k(float* out) {\n",
        c.body, "\n}\n");
    absl::StatusOr<ParsedKernel> parsed = ParseKernel(source, "k", {});
    ASSERT_TRUE(parsed.ok()) << c.body << ": " << parsed.status();
    EXPECT_EQ(parsed->threads_meet, c.meets) << c.body;
  }
}

TEST(KernelParserTest, NamesWhatTheCpuDriverCannotRunWithItsLine) {
  struct Case {
    const char* body;
    const char* feature;
  };
  for (const Case& c : {
           Case{"asm volatile(\"membar.gl;\");", "inline PTX"},
           Case{"out[0] = tex1Dfetch<float>(texture_object, 0);", "textures"},
           Case{"out[0] = surf2Dread<float>(surface, 0, 0);", "surfaces"},
           Case{"child<<<1, 1>>>(out);", "dynamic parallelism"},
       }) {
    const std::string source = absl::StrCat(
        "__managed__ int unused_managed_is_line_one_later;\n"
        "extern \"C\" __global__ void child(float* out) {}\n"
        "extern \"C\" __global__ void k(float* out, cudaTextureObject_t texture_object,\n"
        "                               cudaSurfaceObject_t surface) {\n",
        "  // tex2D asm <<< in a comment mean nothing\n", c.body, "\n}\n");
    absl::StatusOr<ParsedKernel> parsed = ParseKernel(source, "k", {});
    ASSERT_TRUE(parsed.ok()) << c.body << ": " << parsed.status();
    ASSERT_FALSE(parsed->unsupported.empty()) << c.body;
    EXPECT_EQ(parsed->unsupported.front().feature, "managed memory (__managed__)");
    EXPECT_EQ(parsed->unsupported.front().line, 1);
    // The body's use is on line 6 (the textures and surfaces are also in the signature).
    bool found = false;
    for (const UnsupportedUse& use : parsed->unsupported) {
      found = found || (absl::StrContains(use.feature, c.feature) && use.line == 6);
    }
    EXPECT_TRUE(found) << c.body;
  }
}

TEST(KernelParserTest, MalformedEntryPointsAreInvalidArgument) {
  struct Case {
    const char* source;
    const char* message;
  };
  for (const Case& c : {
           Case{"__global__ void k() {}", "must be declared extern \"C\" __global__ void"},
           Case{"extern \"C\" __device__ void k() {}", "must be declared"},
           Case{"extern \"C\" __global__ int k() { return 0; }", "must be declared"},
           Case{"extern \"C\" __global__ void other() {}", "entry point \"k\" not found"},
           Case{"struct S { int a; };\nextern \"C\" __global__ void k(S s) {}",
                "kernel.cu:2: parameter 0 of k (S s): unsupported parameter type \"S\""},
           Case{"extern \"C\" __global__ void k(int& r) {}", "unsupported parameter type"},
           Case{"extern \"C\" __global__ void k(char c) {}", "unsupported parameter type"},
           Case{"extern \"C\" __global__ void k(undeclared_t x) {}",
                "error: unknown type name 'undeclared_t'"},
       }) {
    absl::Status status = ParseKernel(c.source, "k", {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.source;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.source;
  }
}

TEST(KernelParserTest, HostCodeIsInvalidArgumentNamingItsLine) {
  for (const kernels::HostCode& c : kernels::kHostCode) {
    absl::Status status = ParseKernel(c.source, "k", {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.source;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(absl::StrCat("kernel.cu:", c.line, ": ", c.refusal)))
        << c.source;
  }
}

// Beyond kHostCode (whose every case NVRTC is asked about): a host variable template is
// refused wherever device code names it, a class's static one too, and even where only
// its address is taken (which NVRTC lets pass, though device code cannot read through
// that address); one that no device code names passes.
TEST(KernelParserTest, HostVariableTemplatesAreRefusedWhereDeviceCodeNamesThem) {
  struct Case {
    const char* source;
    const char* refusal;  // "" when it parses
  };
  for (const Case& c : {
           Case{"struct S { template <typename T> static T v; };\n"
                "template <typename T> T S::v = T(2);\n"
                "extern \"C\" __global__ void k(int* d) { d[0] = S::v<int>; }",
                "kernel.cu:3: static data member template v, used here, is host code"},
           Case{"template <typename T> T zero = T();\n"
                "extern \"C\" __global__ void k(long* d) { d[0] = (long)&zero<int>; }",
                "kernel.cu:2: variable template zero, used here, is host code"},
           Case{"namespace n { template <typename T> T zero = T(); }\n"
                "__device__ int get() { return n::zero<int>; }\n"
                "extern \"C\" __global__ void k(int* d) { d[0] = get(); }",
                "kernel.cu:2: variable template zero, used here, is host code"},
           Case{"template <typename T> T zero = T();\n"
                "template <typename T> constexpr T one = T(1);\n"
                "struct S { template <typename T> static constexpr T two = T(2); };\n"
                "extern \"C\" __global__ void k(int* d) { d[0] = one<int> + S::two<int>; }",
                ""},
       }) {
    absl::Status status = ParseKernel(c.source, "k", {}).status();
    if (*c.refusal == '\0') {
      EXPECT_TRUE(status.ok()) << c.source << ": " << status;
      continue;
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.source;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.refusal)) << c.source;
  }
}

TEST(KernelParserTest, DeviceCodeOfEveryKindParses) {
  absl::StatusOr<ParsedKernel> parsed =
      ParseKernel(kernels::kDeviceCodeOfEveryKind, "device_code", {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->params.size(), 1u);
}

TEST(KernelParserTest, DeclarationAndDefinitionAgree) {
  absl::StatusOr<ParsedKernel> parsed = ParseKernel(R"(
    extern "C" __global__ void k(float* data, int n);
    extern "C" __global__ void k(float* data, int n) { data[0] = n; }
  )", "k", {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->params.size(), 2u);
}

}  // namespace
}  // namespace gpucmd
