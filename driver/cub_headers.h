#ifndef GPUCMDD_DRIVER_CUB_HEADERS_H_
#define GPUCMDD_DRIVER_CUB_HEADERS_H_

// CUB's block- and warp-wide collectives, for the drivers whose toolkit offers no CUB a
// kernel can include (the CPU driver; HIP 5.2, which ships no hipCUB):
// <cub/block/block_reduce.cuh>, <cub/block/block_scan.cuh>, <cub/block/block_load.cuh>,
// <cub/block/block_store.cuh>, <cub/block/block_radix_sort.cuh>,
// <cub/block/block_exchange.cuh>, <cub/block/block_histogram.cuh>,
// <cub/block/block_discontinuity.cuh>, <cub/block/block_merge_sort.cuh>,
// <cub/warp/warp_reduce.cuh>, <cub/warp/warp_scan.cuh> and <cub/warp/warp_merge_sort.cuh>
// declare those collectives with CUB's template parameters, TempStorage and methods
// (reductions with and without a count of valid items, and over several items per
// thread; inclusive and exclusive sums and scans, with an initial value and the
// aggregate, over one or several items per thread; a warp's Broadcast; a tile's loads and
// stores, blocked or striped, and its exchanges between arrangements; stable radix sorts
// of keys, and of keys with values, by a range of their bits; stable merge sorts by a
// comparator; histograms; head and tail flags), under CUB's contract: a result that CUB
// defines only in thread or lane 0 is defined there only, and a TempStorage is reused
// only after a barrier. They are written over __syncthreads and __syncwarp: the threads
// meet in the TempStorage, where the first thread reduces, scans or sorts their items in
// order (so an operator need not commute). NVRTC uses the CUDA toolkit's own CUB, whose
// <cub/cub.cuh> also declares host code that NVRTC refuses, so none of the drivers offers
// that header: a kernel includes the collectives' own. The CPU driver's kernel front end
// takes every call into namespace cub as a meeting of the block's threads
// (driver/front_end/kernel_parser.cc), as it does calls into cooperative_groups.

#include <string>
#include <utility>
#include <vector>

namespace gpucmd {

// (include name, contents) of each header.
const std::vector<std::pair<std::string, std::string>>& CubHeaders();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CUB_HEADERS_H_
