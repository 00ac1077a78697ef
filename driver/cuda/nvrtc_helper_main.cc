// gpucmd-nvrtc-helper: compiles one kernel with NVRTC for the CUDA driver, in a process
// of its own that the daemon sandboxes (Note [Compile helper] in
// driver/compile_helper.h). TARGET is the compute capability, e.g. 90.

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "driver/compile_helper_main.h"
#include "driver/cuda/nvrtc_compiler.h"

namespace gpucmd {
namespace {

absl::StatusOr<std::string> CompileForComputeCapability(
    const std::string& source, const std::string& entry, const std::vector<std::string>& options,
    const std::string& target, const std::string& output_path, size_t max_log_bytes) {
  int compute_capability = 0;
  if (!absl::SimpleAtoi(target, &compute_capability)) {
    return absl::InvalidArgumentError(absl::StrCat("not a compute capability: ", target));
  }
  return CompileWithNvrtc(source, entry, options, compute_capability, output_path,
                          {.max_log_bytes = max_log_bytes}, nullptr);
}

}  // namespace
}  // namespace gpucmd

int main(int argc, char** argv) {
  return gpucmd::RunCompileHelper(argc, argv, &gpucmd::CompileForComputeCapability);
}
