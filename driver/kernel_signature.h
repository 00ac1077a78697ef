#ifndef GPUCMDD_DRIVER_KERNEL_SIGNATURE_H_
#define GPUCMDD_DRIVER_KERNEL_SIGNATURE_H_

// What the kernel front end (Note [Kernel front end] in driver/front_end/kernel_parser.h)
// reads of a kernel's source: the parameter list of its entry point, declared
//   extern "C" __global__ void name(T0 a, T1* b, ...)
// so the server can check a launch's arguments against the kernel before resolving
// anything, whichever driver compiles it, and what the CPU driver needs to build it.

#include <memory>
#include <string>
#include <utility>
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
  bool read_only = false;                 // kBuffer: the pointee is const
  friend bool operator==(const KernelParam&, const KernelParam&) = default;
};

// A compiled kernel's parameters, shared by its compile cache entry and its launches.
using SharedKernelParams = std::shared_ptr<const std::vector<KernelParam>>;
inline SharedKernelParams ShareKernelParams(std::vector<KernelParam> params) {
  return std::make_shared<const std::vector<KernelParam>>(std::move(params));
}

// What a driver's compiler reports for a kernel it built.
struct CompileOutput {
  std::vector<KernelParam> params;
  std::string log;  // warnings of a successful compile
};

// An `extern __shared__ T name[]` declaration: bytes [begin, end) of the source, from
// its first specifier to the end of its declarator (the `;` excluded).
struct DynamicSharedArray {
  size_t begin = 0;
  size_t end = 0;
  bool in_function = false;  // declared in a function's body, not at namespace scope
  std::string name;
  std::string element_type;
  friend bool operator==(const DynamicSharedArray&, const DynamicSharedArray&) = default;
};

// A use of what the CPU driver cannot run, e.g. {"textures", 12}.
struct UnsupportedUse {
  std::string feature;
  int line = 0;  // of kernel.cu
  friend bool operator==(const UnsupportedUse&, const UnsupportedUse&) = default;
};

struct ParsedKernel {
  std::vector<KernelParam> params;
  std::vector<DynamicSharedArray> dynamic_shared;  // in source order
  std::vector<UnsupportedUse> unsupported;         // in source order
  bool threads_meet = false;  // calls a barrier, warp primitive or cooperative group
  friend bool operator==(const ParsedKernel&, const ParsedKernel&) = default;
};

// Bytes a scalar occupies in a launch's argument slot.
size_t ScalarSize(ScalarKind kind);

// One line per parameter, "kind scalar read_only declared_type", for the on-disk compile
// cache.
std::string SerializeSignature(const std::vector<KernelParam>& params);
absl::StatusOr<std::vector<KernelParam>> DeserializeSignature(absl::string_view text);

// The front-end helper's answer to the daemon. DATA_LOSS when `text` is not one.
std::string SerializeParsedKernel(const ParsedKernel& kernel);
absl::StatusOr<ParsedKernel> DeserializeParsedKernel(absl::string_view text);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_KERNEL_SIGNATURE_H_
