// The kernel front end on hostile source (Note [Fuzzing]): whatever it parses, what it
// reports lies inside the source, and the CPU driver's translation unit can be built
// from it.

#include <cstdlib>

#include "driver/cpu/cpu_prelude.h"
#include "driver/front_end/kernel_parser.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source = gpucmd::fuzzing::AsString(data, size);
  absl::StatusOr<gpucmd::ParsedKernel> parsed = gpucmd::ParseKernel(source, "k", {});
  if (!parsed.ok()) return 0;
  for (const gpucmd::DynamicSharedArray& array : parsed->dynamic_shared) {
    if (array.begin > array.end || array.end > source.size()) std::abort();
  }
  gpucmd::CpuKernelTranslationUnit(source, "k", *parsed);
  return 0;
}
