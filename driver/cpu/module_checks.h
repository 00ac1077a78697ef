#ifndef GPUCMDD_DRIVER_CPU_MODULE_CHECKS_H_
#define GPUCMDD_DRIVER_CPU_MODULE_CHECKS_H_

// What the CPU driver refuses in a kernel, checked on what the compiler made rather
// than on the text the client sent, so that no spelling gets past them (macros, token
// pasting, line markers, a system header's macro):
//
// - Inline assembly, in any spelling (`asm`, `__asm__`, `__asm`, at file scope or in a
//   function), which the compiler brackets with #APP and #NO_APP in its assembly
//   output: it could make system calls directly (the executor's system-call filter is
//   the backstop) or pull files into the module with `.incbin` (the compiler's
//   sandbox is the backstop). Symbol renaming in system headers (`__asm__("name")` on
//   a declaration) is not inline assembly and stays.
// - Indirect functions (`ifunc`), whose resolvers run when a module is loaded.
// - Any code that runs when the module is loaded or unloaded: constructors, destructors,
//   and globals with dynamic initializers all land in the module's .init_array,
//   .fini_array, .preinit_array, .ctors, .dtors, .init or .fini sections, which a
//   module linked without the C runtime's start files otherwise does not have.
//
// Errors are INVALID_ARGUMENT naming what was found.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpucmd {

// `assembly` is the compiler's assembly output for the kernel (a .s file).
absl::Status CheckKernelAssembly(absl::string_view assembly);

// `module` is a built shared object (ELF64).
absl::Status CheckNoLoadTimeCode(absl::string_view module);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_MODULE_CHECKS_H_
