#ifndef GPUCMDD_DRIVER_CPU_KERNEL_ABI_H_
#define GPUCMDD_DRIVER_CPU_KERNEL_ABI_H_

// The interface between a CPU-compiled kernel module and the executor that runs it.
// The module's prelude (cpu_prelude.cc) declares the same layout; kKernelAbiVersion,
// exported by every module as gpucmd_abi_version, must match.
//
// A module exports:
//   int gpucmd_abi_version;                         == kKernelAbiVersion
//   int gpucmd_uses_barrier;                        1 when the kernel's threads must meet:
//                                                   __syncthreads or warp primitives
//   void gpucmd_bind(KernelThreadContext*);         sets the calling thread's context
//   void gpucmd_entry(void** args);                 runs one GPU thread of the kernel
//   void gpucmd_run_block(void** args);             runs every thread of the bound block,
//                                                   one after another (no barriers)
// args[i] points at an 8-byte slot holding argument i (a device address or a scalar in
// its low bytes), as CUDA's kernelParams do.

#include <cstdint>

namespace gpucmd {

inline constexpr int kKernelAbiVersion = 4;

// What a warp-level primitive asks of its warp (KernelThreadContext::warp). Lanes are
// the threads of a warp: 32 consecutive linear thread indices of the block.
enum WarpOp : int {
  kWarpShuffle = 0,      // the value of lane `arg` of this lane's `width`-lane segment
  kWarpShuffleUp = 1,    // of lane - `arg`, within the segment (else this lane's own)
  kWarpShuffleDown = 2,  // of lane + `arg`, within the segment (else this lane's own)
  kWarpShuffleXor = 3,   // of lane ^ `arg`, unless that is in a later segment
  kWarpBallot = 4,       // the lanes whose value is nonzero
  kWarpAny = 5,          // 1 when some lane's value is nonzero
  kWarpAll = 6,          // 1 when every lane's value is nonzero
  kWarpMatchAny = 7,     // the lanes whose value equals this lane's
  kWarpSync = 8,         // nothing: the lanes only meet
  // The lanes that wait at a meeting of this kind with this lane's value (the call site
  // of __activemask or cooperative_groups::coalesced_threads, its line in the high
  // bits), once no running lane of the warp can go on; the lowest value first. So lanes
  // that skipped a branch wait at a later call for the lanes in it, as a GPU's warp
  // reconverges.
  kWarpCoalesce = 10,
};

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
  void* scheduler;  // the executor's, for `sync` and `warp`
  // A warp-level primitive `op` (a WarpOp) with this lane's `value`: suspends this GPU
  // thread until every lane of `mask` that still runs (and this one) arrived at one,
  // then returns what `op` makes of the values the lanes brought. `width`, a power of
  // two up to 32, splits the warp into segments for the shuffles.
  uint64_t (*warp)(KernelThreadContext*, int op, uint32_t mask, uint64_t value, int arg,
                   int width);
  // A failed assert(): ends the launch, which fails with `message`; never returns.
  void (*fail)(KernelThreadContext*, const char* message);
  // printf: adds `size` bytes of `text` to what the launch printed.
  void (*print)(KernelThreadContext*, const char* text, uint32_t size);
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_KERNEL_ABI_H_
