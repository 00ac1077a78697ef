// gpucmd-hiprtc-helper: compiles one kernel with hiprtc for the HIP driver, in a process
// of its own that the daemon sandboxes (Note [Compile helper] in
// driver/compile_helper.h). TARGET is the GPU architecture, e.g. gfx90a.

#include "driver/compile_helper_main.h"
#include "driver/hip/hiprtc_compiler.h"

int main(int argc, char** argv) {
  return gpucmd::RunCompileHelper(argc, argv, &gpucmd::CompileWithHiprtc);
}
