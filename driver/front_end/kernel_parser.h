#ifndef GPUCMDD_DRIVER_FRONT_END_KERNEL_PARSER_H_
#define GPUCMDD_DRIVER_FRONT_END_KERNEL_PARSER_H_

// Note [Kernel front end]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Every driver reads a kernel's source the same way: parsed by libclang as C++17 after
// the CPU driver's prelude and headers (driver/cpu/cpu_prelude.h, cpu_headers.h), which
// declare the CUDA device API. The prelude's CUDA qualifiers leave annotations in the
// syntax tree (`__global__`, `__shared__`, `__managed__`) and what the CPU driver cannot
// run is declared with a `gpucmd-unsupported:FEATURE` annotation, so a use of it is
// found by what it refers to, wherever it is written, and never inside a comment or a
// string. From the tree the front end takes:
//   - the entry point: a function named ENTRY with C language linkage, `__global__`,
//     returning void; its parameters by canonical type (typedefs resolved, default
//     arguments and attributes such as __launch_bounds__ allowed);
//   - each `extern __shared__ T name[]` declaration's exact source range, which the CPU
//     driver replaces by the launch's dynamic shared memory;
//   - whether the block's threads meet (barriers, warp primitives, cooperative groups),
//     which decides whether the CPU driver runs them as fibers or as a plain loop.
// The parser reads hostile source, so it runs in the sandboxed front-end helper
// (gpucmd-kernel-front-end, driver/compile_helper.h), never in the daemon.
//
// Note [Host code in a kernel's source]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel's source is device code only: NVRTC (its JIT mode, CUDA 13) refuses any
// function declared without __device__ or __global__ (__host__ alone included, as is
// constexpr without __device__), and any host variable: one at namespace scope neither
// const nor __device__, __constant__ or __shared__ (a structured binding there, const or
// not), a class's static data member that is not const (whatever its annotations), and
// a variable template's host specialization where device code uses it. It refuses
// thread_local on any variable. hiprtc refuses such code once device code uses it (and
// its LLVM aborts the process on thread_local). The CPU driver's host compiler would take
// it all (its prelude defines the qualifiers as nothing), so a kernel that ran on the CPU
// driver failed to compile on a GPU. The front end therefore refuses host code as NVRTC
// does, on every driver: the prelude's __host__, __device__ and __constant__ leave
// annotations, and each function and variable the source declares is checked, and each
// variable template's specialization it names (also where only its address is taken,
// which NVRTC lets pass: device code cannot read through it). Exempt is what takes its
// place from elsewhere: lambdas (their enclosing function's), defaulted members, deleted
// members, deduction guides, and redeclarations of the runtime's functions (puts, say:
// attributes added after the prelude's definition are dropped, so they cannot be read).
// The attributes of a function template or a variable template are read from its
// declaration printed without its body, since libclang's cursors do not show them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "driver/kernel_signature.h"

namespace gpucmd {

// Parses `source` (the client's kernel.cu) with the client's compile `options` (its -D
// and -U take effect) and reads `entry`. `resource_directory` holds the parser's own
// headers (stddef.h, ...); empty: where the installed libclang keeps them.
// INVALID_ARGUMENT naming kernel.cu's line when the entry point is missing or malformed, a
// parameter's type is not a buffer, one of the six scalar kinds or CUtensorMap, the
// source declares host code or thread_local variables (Note [Host code in a kernel's
// source]), or it uses what the CPU driver cannot run (inline assembly, textures,
// surfaces, __managed__, kernel launches from a kernel); the message carries the parser's
// first errors when the source does not compile.
absl::StatusOr<ParsedKernel> ParseKernel(absl::string_view source, absl::string_view entry,
                                         const std::vector<std::string>& options,
                                         const std::string& resource_directory = "");

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_FRONT_END_KERNEL_PARSER_H_
