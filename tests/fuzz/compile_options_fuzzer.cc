// A client's compile options, one per line, in each compiler's spelling (Note [Fuzzing]).

#include "absl/strings/str_split.h"
#include "driver/compile_options.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> options =
      absl::StrSplit(gpucmd::fuzzing::AsString(data, size), '\n');
  for (const gpucmd::CompilerSpelling& spelling :
       {gpucmd::CompilerSpelling{.fast_math = "-ffast-math"},
        gpucmd::CompilerSpelling{.fast_math = "--use_fast_math", .passes_optimization = false}}) {
    gpucmd::TranslateCompileOptions(options, spelling).IgnoreError();
  }
  return 0;
}
