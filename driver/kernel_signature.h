#ifndef GPUCMDD_DRIVER_KERNEL_SIGNATURE_H_
#define GPUCMDD_DRIVER_KERNEL_SIGNATURE_H_

// The parameter list of a kernel entry point, read from its source. Every driver
// compiles the same CUDA C++ dialect, whose entry points are declared
//   extern "C" __global__ void name(T0 a, T1* b, ...)
// so the server can check a launch's arguments against the kernel before resolving
// anything, whichever driver compiles it.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpucmd {

enum class ParamKind { kBuffer, kScalar, kTensorMap };
enum class ScalarKind { kNone, kI32, kU32, kI64, kU64, kF32, kF64 };

struct KernelParam {
  ParamKind kind = ParamKind::kScalar;
  ScalarKind scalar = ScalarKind::kNone;  // for kScalar
  std::string declared_type;              // as written, for messages
  friend bool operator==(const KernelParam&, const KernelParam&) = default;
};

// What a driver's compiler reports for a kernel it built.
struct CompileOutput {
  std::vector<KernelParam> params;
  std::string log;  // warnings of a successful compile
};

// Bytes a scalar occupies in a launch's argument slot.
size_t ScalarSize(ScalarKind kind);

// Finds `entry`'s declaration in `source` and classifies its parameters: pointers are
// buffers, CUtensorMap (by value) is a tensor map, the integer and floating types are
// scalars. INVALID_ARGUMENT when the entry point is missing, not `extern "C"
// __global__ void`, or has a parameter of another type.
absl::StatusOr<std::vector<KernelParam>> ParseKernelSignature(absl::string_view source,
                                                              absl::string_view entry);

// One line per parameter, "kind scalar declared_type", for the on-disk compile cache.
std::string SerializeSignature(const std::vector<KernelParam>& params);
absl::StatusOr<std::vector<KernelParam>> DeserializeSignature(absl::string_view text);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_KERNEL_SIGNATURE_H_
