// gpucmd-kernel-front-end: parses one kernel's source for every driver (Note [Kernel
// front end] in driver/front_end/kernel_parser.h), in a process of its own that the
// daemon sandboxes like a compile helper (Note [Compile helper] in
// driver/compile_helper.h). Its "image" is the parse, SerializeParsedKernel's text;
// TARGET is unused. In a relocatable bundle (deploy/make_bundle.sh) libclang's headers
// are in lib/clang beside bin/.

#include <filesystem>

#include "base/companion.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "driver/compile_helper_main.h"
#include "driver/front_end/kernel_parser.h"

namespace gpucmd {
namespace {

absl::StatusOr<std::string> ParseIntoImage(const std::string& source, const std::string& entry,
                                           const std::vector<std::string>& options,
                                           const std::string& /*target*/,
                                           const std::string& output_path,
                                           size_t /*max_log_bytes*/) {
  const std::filesystem::path bundled =
      std::filesystem::path(SelfPath()).parent_path() / ".." / "lib" / "clang";
  std::error_code missing;
  const std::string resource_directory =
      std::filesystem::is_directory(bundled, missing) ? bundled.lexically_normal().string() : "";
  ASSIGN_OR_RETURN(ParsedKernel parsed,
                   ParseKernel(source, entry, options, resource_directory));
  RETURN_IF_ERROR(WriteFileAtomically(output_path, SerializeParsedKernel(parsed)));
  return std::string();
}

}  // namespace
}  // namespace gpucmd

int main(int argc, char** argv) {
  return gpucmd::RunCompileHelper(argc, argv, &gpucmd::ParseIntoImage);
}
