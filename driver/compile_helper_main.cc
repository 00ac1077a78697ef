#include "driver/compile_helper_main.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "base/file.h"

#if defined(__SANITIZE_ADDRESS__)
// The leak checker of a sanitizer build's helper (tests only) needs /proc, which the
// sandbox denies; a helper lives for one compile anyway.
extern "C" int __lsan_is_turned_off() { return 1; }
#endif

namespace gpucmd {

int RunCompileHelper(int argc, char** argv, HelperCompiler compile) {
  size_t max_log_bytes = 0;
  if (argc < 5 || !absl::SimpleAtoi(argv[4], &max_log_bytes)) {
    std::fprintf(stderr, "usage: %s DIRECTORY ENTRY TARGET MAX_LOG_BYTES [OPTION...]\n",
                 argc > 0 ? argv[0] : "compile-helper");
    return static_cast<int>(absl::StatusCode::kInvalidArgument);
  }
  const std::string directory = argv[1];
  std::vector<std::string> options(argv + 5, argv + argc);
  absl::StatusOr<std::string> log =
      compile(ReadFileOrEmpty(directory + "/kernel.cu"), argv[2], options, argv[3],
              directory + "/kernel.image", max_log_bytes);
  if (!log.ok()) {
    std::fprintf(stderr, "%s", std::string(log.status().message()).c_str());
    return static_cast<int>(log.status().code());
  }
  std::fwrite(log->data(), 1, log->size(), stdout);
  return 0;
}

}  // namespace gpucmd
