#include "driver/compile_options.h"

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(CompileOptionsTest, TranslatesToTheCompilersSpelling) {
  absl::StatusOr<std::vector<std::string>> host = TranslateCompileOptions(
      {"-DTILE=16", "-UX", "-O3", "--use_fast_math"}, {.fast_math = "-ffast-math"});
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(*host, (std::vector<std::string>{"-DTILE=16", "-UX", "-O3", "-ffast-math"}));
  absl::StatusOr<std::vector<std::string>> nvrtc = TranslateCompileOptions(
      {"-O2", "-use_fast_math"},
      {.fast_math = "--use_fast_math", .passes_optimization = false});
  ASSERT_TRUE(nvrtc.ok());
  EXPECT_EQ(*nvrtc, std::vector<std::string>{"--use_fast_math"});
}

TEST(CompileOptionsTest, OtherOptionsAreRefusedByName) {
  for (const char* option : {"-arch=sm_90", "-D", "-o", "--keep"}) {
    absl::Status status = TranslateCompileOptions({option}, {.fast_math = "x"}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << option;
    EXPECT_NE(status.message().find(option), absl::string_view::npos) << option;
  }
}

}  // namespace
}  // namespace gpucmd
