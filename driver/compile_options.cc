#include "driver/compile_options.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpucmd {

absl::StatusOr<std::vector<std::string>> TranslateCompileOptions(
    const std::vector<std::string>& options, const CompilerSpelling& spelling) {
  std::vector<std::string> flags;
  for (const std::string& option : options) {
    if ((absl::StartsWith(option, "-D") || absl::StartsWith(option, "-U")) && option.size() > 2) {
      flags.push_back(option);
    } else if (option == "-O0" || option == "-O1" || option == "-O2" || option == "-O3") {
      if (spelling.passes_optimization) flags.push_back(option);
    } else if (option == "--use_fast_math" || option == "-use_fast_math") {
      flags.push_back(spelling.fast_math);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "compile option \"", option, "\" is not supported (use -D, -U, -O0..-O3, "
          "--use_fast_math)"));
    }
  }
  return flags;
}

}  // namespace gpucmd
