#include "server/command/copy_chunks.h"

#include <algorithm>

namespace gpucmd {

std::vector<CopyChunk> SplitCopy(const CopyLayout& layout, uint64_t chunk_bytes) {
  std::vector<CopyChunk> chunks;
  if (layout.is_contiguous()) {
    const uint64_t total = layout.host_bytes();
    for (uint64_t done = 0; done < total; done += chunk_bytes) {
      chunks.push_back(CopyChunk{
          .host_offset_bytes = done,
          .layout = CopyLayout::Contiguous(layout.offset_bytes + done,
                                           std::min(chunk_bytes, total - done))});
    }
    return chunks;
  }
  if (layout.width_bytes == 0) return chunks;
  const uint64_t rows_per_chunk = std::max<uint64_t>(1, chunk_bytes / layout.width_bytes);
  for (uint64_t row = 0; row < layout.height; row += rows_per_chunk) {
    chunks.push_back(CopyChunk{
        .host_offset_bytes = row * layout.width_bytes,
        .layout = CopyLayout::Pitched(layout.offset_bytes + row * layout.stride_bytes,
                                      layout.width_bytes,
                                      std::min(rows_per_chunk, layout.height - row),
                                      layout.stride_bytes)});
  }
  return chunks;
}

}  // namespace gpucmd
