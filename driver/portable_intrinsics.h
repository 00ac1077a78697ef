#ifndef GPUCMDD_DRIVER_PORTABLE_INTRINSICS_H_
#define GPUCMDD_DRIVER_PORTABLE_INTRINSICS_H_

// CUDA intrinsics as device C++ over the ones every driver has (__shfl_sync,
// atomicAdd on a float, the vector types), for the drivers that lack them: the CPU
// driver's prelude and HIP's (5.2) CUDA spellings. The cache-hinted loads and stores
// (__ldcs, __stwt, ...), the typed minima and maxima (umin, llmax, ...), the packed-byte
// dot products __dp4a and __dp2a_lo/_hi, the warp reductions
// __reduce_{add,min,max,and,or,xor}_sync, and atomicAdd on a float2 or float4, each
// element atomic on its own as on a GPU (the vector as a whole is not).

namespace gpucmd {

// The definitions, to follow __shfl_sync's, atomicAdd's and the vector types'.
const char* PortableIntrinsicDefinitions();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_PORTABLE_INTRINSICS_H_
