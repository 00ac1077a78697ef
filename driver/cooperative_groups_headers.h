#ifndef GPUCMDD_DRIVER_COOPERATIVE_GROUPS_HEADERS_H_
#define GPUCMDD_DRIVER_COOPERATIVE_GROUPS_HEADERS_H_

// <cooperative_groups.h> and its reduce.h, scan.h and memcpy_async.h for the drivers
// whose own toolkit offers none a CUDA kernel can use (the CPU driver; HIP, whose groups
// differ): the block, tiles of up to a warp and coalesced groups with their shuffles,
// votes and sync, reduce, the scans and the group copies, written over CUDA's warp
// primitives and gpucmd_coalesced_lanes (the lanes that reached a call together), which
// each such driver provides. NVRTC uses the CUDA toolkit's own.

#include <string>
#include <utility>
#include <vector>

namespace gpucmd {

// (include name, contents) of each header.
const std::vector<std::pair<std::string, std::string>>& CooperativeGroupsHeaders();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_COOPERATIVE_GROUPS_HEADERS_H_
