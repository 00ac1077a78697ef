#ifndef GPUCMDD_TESTS_FUZZ_FUZZ_INPUT_H_
#define GPUCMDD_TESTS_FUZZ_FUZZ_INPUT_H_

// Note [Fuzzing]
// ~~~~~~~~~~~~~~
// Each harness in tests/fuzz defines LLVMFuzzerTestOneInput over code that reads what
// clients and operators send: the config parser, the compile-option translation, the
// kernel front end's parser, request validation. Built two ways:
//   - by Bazel with replay_main.cc, as a test that runs the harness over its checked-in
//     seed corpus (tests/fuzz/corpus/NAME) in every config (asan and tsan included);
//   - by tools/fuzz.sh with clang and libFuzzer under ASan and UBSan, which explores
//     from those seeds for a bounded time (CI: 30 s each; longer by hand:
//     tools/fuzz.sh --seconds=3600 kernel_parser). The kernel parser runs about five
//     inputs a second (libclang parses the prelude each time), the others many
//     thousands.
// A harness crashes (or a sanitizer reports) only on a real defect: every outcome the
// code under test may legitimately have is an ordinary return.

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpucmd::fuzzing {

inline std::string AsString(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace gpucmd::fuzzing

#endif  // GPUCMDD_TESTS_FUZZ_FUZZ_INPUT_H_
