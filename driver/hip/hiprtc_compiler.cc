#include "driver/hip/hiprtc_compiler.h"

#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "driver/hip/hip_status.h"

namespace gpucmd {
namespace {

struct ProgramDeleter {
  void operator()(hiprtcProgram* program) const {
    hiprtcDestroyProgram(program);
    delete program;
  }
};

}  // namespace

absl::StatusOr<std::vector<std::string>> TranslateHiprtcOptions(
    const std::vector<std::string>& options) {
  std::vector<std::string> flags;
  for (const std::string& option : options) {
    if ((absl::StartsWith(option, "-D") || absl::StartsWith(option, "-U")) && option.size() > 2) {
      flags.push_back(option);
    } else if (option == "-O0" || option == "-O1" || option == "-O2" || option == "-O3") {
      flags.push_back(option);
    } else if (option == "--use_fast_math" || option == "-use_fast_math") {
      flags.push_back("-ffast-math");
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "compile option \"", option, "\" is not supported (use -D, -U, -O0..-O3, "
          "--use_fast_math)"));
    }
  }
  return flags;
}

absl::StatusOr<CompileOutput> CompileWithHiprtc(const std::string& source,
                                                const std::string& entry,
                                                const std::vector<std::string>& options,
                                                const std::string& architecture,
                                                const std::string& output_path,
                                                size_t max_log_bytes) {
  CompileOutput output;
  ASSIGN_OR_RETURN(output.params, ParseKernelSignature(source, entry));
  ASSIGN_OR_RETURN(std::vector<std::string> flags, TranslateHiprtcOptions(options));
  flags.push_back(absl::StrCat("--offload-arch=", architecture));
  std::unique_ptr<hiprtcProgram, ProgramDeleter> program(new hiprtcProgram(nullptr));
  RETURN_IF_ERROR(HiprtcStatus(
      hiprtcCreateProgram(program.get(), source.c_str(), "kernel.cu", 0, nullptr, nullptr),
      "hiprtcCreateProgram"));
  std::vector<const char*> raw;
  for (const std::string& flag : flags) raw.push_back(flag.c_str());
  hiprtcResult compiled = hiprtcCompileProgram(*program, static_cast<int>(raw.size()), raw.data());
  size_t log_size = 0;
  if (hiprtcGetProgramLogSize(*program, &log_size) == HIPRTC_SUCCESS && log_size > 1) {
    output.log.resize(log_size);
    hiprtcGetProgramLog(*program, output.log.data());
    output.log.resize(std::min(log_size - 1, max_log_bytes));
  }
  if (compiled == HIPRTC_ERROR_COMPILATION) {
    return absl::InvalidArgumentError(absl::StrCat("compile of ", entry, " failed:\n", output.log));
  }
  RETURN_IF_ERROR(HiprtcStatus(compiled, "hiprtcCompileProgram"));
  size_t size = 0;
  RETURN_IF_ERROR(HiprtcStatus(hiprtcGetCodeSize(*program, &size), "hiprtcGetCodeSize"));
  std::string code(size, '\0');
  RETURN_IF_ERROR(HiprtcStatus(hiprtcGetCode(*program, code.data()), "hiprtcGetCode"));
  std::string temporary = output_path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary);
    file.write(code.data(), static_cast<std::streamsize>(code.size()));
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", temporary));
  }
  if (std::rename(temporary.c_str(), output_path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot store the module at ", output_path));
  }
  return output;
}

}  // namespace gpucmd
