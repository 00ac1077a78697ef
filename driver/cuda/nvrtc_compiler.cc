#include "driver/cuda/nvrtc_compiler.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "driver/compile_options.h"

namespace gpucmd {
namespace {

// The one conversion of nvrtcResult values to absl::Status.
absl::Status NvrtcStatus(nvrtcResult result, absl::string_view call) {
  if (result == NVRTC_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", nvrtcGetErrorString(result)));
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* program) const {
    nvrtcDestroyProgram(program);
    delete program;
  }
};

std::string ProgramLog(nvrtcProgram program, size_t max_bytes) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  nvrtcGetProgramLog(program, log.data());
  log.resize(size - 1);
  if (log.size() > max_bytes) {
    log.resize(max_bytes);
    absl::StrAppend(&log, "\n[compiler log cut at ", max_bytes, " bytes]");
  }
  return log;
}

// The toolkit's headers (cooperative_groups.h, cuda_fp16.h...): beside the NVRTC library
// this process loaded, else the default toolkit's; empty when neither has them. The
// compile helper's sandbox reads /usr and /opt, where toolkits are installed.
std::string ToolkitIncludeDirectory() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  Dl_info library{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &library) != 0 &&
      library.dli_fname != nullptr) {
    candidates.push_back(fs::path(library.dli_fname).parent_path() / ".." / "include");
  }
  candidates.push_back("/usr/local/cuda/include");
  for (const fs::path& candidate : candidates) {
    std::error_code error;
    if (fs::exists(candidate / "cooperative_groups.h", error)) {
      return candidate.lexically_normal().string();
    }
  }
  return "";
}

// <assert.h> and <cassert>, which NVRTC lacks: CUDA's device-side assert.
constexpr char kAssertHeader[] = R"(#pragma once
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
#endif
)";

}  // namespace

std::vector<int> NvrtcSupportedArchitectures() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return {};
  std::vector<int> architectures(count);
  nvrtcGetSupportedArchs(architectures.data());
  return architectures;
}

absl::StatusOr<std::string> CompileWithNvrtc(const std::string& source,
                                             const std::string& entry,
                                             const std::vector<std::string>& options,
                                             int architecture, const std::string& output_path,
                                             const NvrtcOptions& nvrtc, bool* produced_ptx) {
  std::string log;
  ASSIGN_OR_RETURN(std::vector<std::string> flags, TranslateCompileOptions(options, {.fast_math = "--use_fast_math", .passes_optimization = false}));
  std::vector<int> known = NvrtcSupportedArchitectures();
  bool cubin = std::find(known.begin(), known.end(), architecture) != known.end();
  if (!cubin && known.empty()) {
    return absl::FailedPreconditionError("NVRTC reports no supported architectures");
  }
  int target = cubin ? architecture : known.back();
  flags.push_back(cubin ? absl::StrCat("--gpu-architecture=sm_", target)
                        : absl::StrCat("--gpu-architecture=compute_", target));
  flags.push_back("--std=c++17");
  if (std::string include = ToolkitIncludeDirectory(); !include.empty()) {
    flags.push_back(absl::StrCat("--include-path=", include));
    // Where CUDA 13 keeps libcu++ (cuda/std/...), which the toolkit's headers include.
    if (std::filesystem::exists(include + "/cccl")) {
      flags.push_back(absl::StrCat("--include-path=", include, "/cccl"));
    }
  }

  // printf is NVRTC's own: the headers that declare it on the host have nothing to add.
  const char* header_contents[] = {kAssertHeader, kAssertHeader, "#pragma once\n",
                                   "#pragma once\n"};
  const char* header_names[] = {"assert.h", "cassert", "stdio.h", "cstdio"};
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram(nullptr));
  RETURN_IF_ERROR(NvrtcStatus(nvrtcCreateProgram(program.get(), source.c_str(), "kernel.cu", 4,
                                                 header_contents, header_names),
                              "nvrtcCreateProgram"));
  std::vector<const char*> raw;
  for (const std::string& flag : flags) raw.push_back(flag.c_str());
  nvrtcResult compiled =
      nvrtcCompileProgram(*program, static_cast<int>(raw.size()), raw.data());
  log = ProgramLog(*program, nvrtc.max_log_bytes);
  if (compiled == NVRTC_ERROR_COMPILATION) {
    return absl::InvalidArgumentError(absl::StrCat("compile of ", entry, " failed:\n", log));
  }
  RETURN_IF_ERROR(NvrtcStatus(compiled, "nvrtcCompileProgram"));

  size_t size = 0;
  std::string image;
  if (cubin) {
    RETURN_IF_ERROR(NvrtcStatus(nvrtcGetCUBINSize(*program, &size), "nvrtcGetCUBINSize"));
    image.resize(size);
    RETURN_IF_ERROR(NvrtcStatus(nvrtcGetCUBIN(*program, image.data()), "nvrtcGetCUBIN"));
  } else {
    RETURN_IF_ERROR(NvrtcStatus(nvrtcGetPTXSize(*program, &size), "nvrtcGetPTXSize"));
    image.resize(size);
    RETURN_IF_ERROR(NvrtcStatus(nvrtcGetPTX(*program, image.data()), "nvrtcGetPTX"));
  }
  if (produced_ptx != nullptr) *produced_ptx = !cubin;
  RETURN_IF_ERROR(WriteFileAtomically(output_path, image));
  return log;
}

}  // namespace gpucmd
