#ifndef GPUCMDD_SERVER_COMMAND_COPY_CHUNKS_H_
#define GPUCMDD_SERVER_COMMAND_COPY_CHUNKS_H_

// Splitting a host<->device copy into pieces, for copies staged through pinned chunks
// (Note [Staging through pinned chunks] in server/command/command.h).

#include <cstdint>
#include <vector>

#include "driver/types.h"

namespace gpucmd {

// One piece of a copy: its part of the device-side layout, and where its bytes sit in
// the packed host buffer.
struct CopyChunk {
  uint64_t host_offset_bytes = 0;
  CopyLayout layout;
};

// `layout` in order, as pieces of at most `chunk_bytes` host bytes each (a positive
// number); a pitched layout splits between rows, so a row wider than `chunk_bytes` is a
// piece of its own. Empty for an empty layout.
std::vector<CopyChunk> SplitCopy(const CopyLayout& layout, uint64_t chunk_bytes);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_COPY_CHUNKS_H_
