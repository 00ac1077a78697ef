#ifndef GPUCMDD_DRIVER_CPU_KERNEL_ABI_H_
#define GPUCMDD_DRIVER_CPU_KERNEL_ABI_H_

// The interface between a CPU-compiled kernel module and the executor that runs it.
// The module's prelude (cpu_prelude.cc) declares the same layout; kKernelAbiVersion,
// exported by every module as gpucmd_abi_version, must match.
//
// A module exports:
//   int gpucmd_abi_version;                         == kKernelAbiVersion
//   int gpucmd_uses_barrier;                        1 when the kernel calls __syncthreads
//   void gpucmd_bind(KernelThreadContext*);         sets the calling thread's context
//   void gpucmd_entry(void** args);                 runs one GPU thread of the kernel
// args[i] points at an 8-byte slot holding argument i (a device address or a scalar in
// its low bytes), as CUDA's kernelParams do.

#include <cstdint>

namespace gpucmd {

inline constexpr int kKernelAbiVersion = 1;

struct KernelDim3 {
  unsigned x, y, z;
};

struct KernelThreadContext {
  KernelDim3 thread_idx;
  KernelDim3 block_idx;
  KernelDim3 block_dim;
  KernelDim3 grid_dim;
  void* dynamic_shared;
  // __syncthreads(): suspends this GPU thread until every thread of its block arrived.
  void (*sync)(KernelThreadContext*);
  void* scheduler;  // the executor's, for `sync`
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_KERNEL_ABI_H_
