#include "driver/hip/hiprtc_compiler.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "driver/bfloat16_header.h"
#include "driver/compile_options.h"
#include "driver/cooperative_groups_headers.h"
#include "driver/cub_headers.h"
#include "driver/half_min_max.h"
#include "driver/hip/hip_cuda_compat.h"
#include "driver/hip/hip_status.h"
#include "driver/math_constants_header.h"

namespace gpucmd {
namespace {

struct ProgramDeleter {
  void operator()(hiprtcProgram* program) const {
    hiprtcDestroyProgram(program);
    delete program;
  }
};


}  // namespace

absl::StatusOr<std::string> CompileWithHiprtc(const std::string& source,
                                              const std::string& entry,
                                              const std::vector<std::string>& options,
                                              const std::string& architecture,
                                              const std::string& output_path,
                                              size_t max_log_bytes) {
  std::string log;
  ASSIGN_OR_RETURN(std::vector<std::string> flags, TranslateCompileOptions(options, {.fast_math = "-ffast-math"}));
  flags.push_back(absl::StrCat("--offload-arch=", architecture));
  // The dialect of every driver (NVRTC's --std=c++17, the CPU compiler's -std=c++17);
  // hiprtc's own default is C++14.
  flags.push_back("-std=c++17");
  // CUDA's spellings, and the cooperative_groups, CUB, bfloat16 and math constants headers
  // a CUDA kernel includes.
  const std::string unit = absl::StrCat(HipCudaCompatPrelude(), source);
  std::vector<const char*> header_contents, header_names;
  for (const auto* headers : {&CooperativeGroupsHeaders(), &CubHeaders()}) {
    for (const auto& [name, contents] : *headers) {
      header_names.push_back(name.c_str());
      header_contents.push_back(contents.c_str());
    }
  }
  header_names.push_back("cuda_bf16.h");
  header_contents.push_back(BFloat16Header());
  header_names.push_back("math_constants.h");
  header_contents.push_back(MathConstantsHeader());
  // hiprtc compiles with HIP's half-precision types and printf already declared; what
  // CUDA's half header has beyond HIP's is added.
  const std::string half_additions = absl::StrCat("#pragma once\n", HalfMinMaxDefinitions());
  header_names.push_back("cuda_fp16.h");
  header_contents.push_back(half_additions.c_str());
  for (const char* declared : {"stdio.h", "cstdio"}) {
    header_names.push_back(declared);
    header_contents.push_back("#pragma once\n");
  }
  std::unique_ptr<hiprtcProgram, ProgramDeleter> program(new hiprtcProgram(nullptr));
  RETURN_IF_ERROR(HiprtcStatus(
      hiprtcCreateProgram(program.get(), unit.c_str(), "kernel.cu",
                          static_cast<int>(header_names.size()), header_contents.data(),
                          header_names.data()),
      "hiprtcCreateProgram"));
  std::vector<const char*> raw;
  for (const std::string& flag : flags) raw.push_back(flag.c_str());
  hiprtcResult compiled = hiprtcCompileProgram(*program, static_cast<int>(raw.size()), raw.data());
  size_t log_size = 0;
  if (hiprtcGetProgramLogSize(*program, &log_size) == HIPRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    hiprtcGetProgramLog(*program, log.data());
    log.resize(std::min(log_size - 1, max_log_bytes));
  }
  if (compiled == HIPRTC_ERROR_COMPILATION) {
    return absl::InvalidArgumentError(absl::StrCat("compile of ", entry, " failed:\n", log));
  }
  RETURN_IF_ERROR(HiprtcStatus(compiled, "hiprtcCompileProgram"));
  size_t size = 0;
  RETURN_IF_ERROR(HiprtcStatus(hiprtcGetCodeSize(*program, &size), "hiprtcGetCodeSize"));
  std::string code(size, '\0');
  RETURN_IF_ERROR(HiprtcStatus(hiprtcGetCode(*program, code.data()), "hiprtcGetCode"));
  RETURN_IF_ERROR(WriteFileAtomically(output_path, code));
  return log;
}

}  // namespace gpucmd
