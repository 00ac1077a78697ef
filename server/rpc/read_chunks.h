#ifndef GPUCMDD_SERVER_RPC_READ_CHUNKS_H_
#define GPUCMDD_SERVER_RPC_READ_CHUNKS_H_

// Note [Read chunks sent from the read's bytes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A streamed read's chunk is a ReadResponse. Built as one, its bytes were copied twice in
// the daemon: into the message's `data`, then into the buffer gRPC serialized it into
// (16 MiB read, 32 MiB copied before the socket). The daemon now writes the message's
// few framing bytes itself and hands gRPC the read's own bytes as a slice that shares
// them, so the only copy left is the kernel's, into the socket. gRPC may hold such a
// slice after the call ended (until its transport wrote it), so the bytes are shared:
// they live, with whatever must outlive them (the payload pool they go back to), until
// the last slice that names them is dropped. A small chunk is copied instead (a shared
// slice costs an allocation and an atomic count more than a copy of a few KiB), and so
// is pinned memory, which belongs to a device's pinned pool and goes back there at once.
//
// Thread-safety: the shared bytes are released on whichever thread drops the last slice.

#include <cstdint>
#include <memory>
#include <optional>

#include "driver/bytes.h"
#include "grpcpp/support/byte_buffer.h"

namespace gpucmd {

// Chunks of at least this many bytes are sent from the read's bytes, not copied.
inline constexpr uint64_t kSharedChunkMinBytes = uint64_t{64} << 10;

// `bytes` to be shared by the chunks sent from them; `keep_alive` is held until the bytes
// are released (after them).
std::shared_ptr<const Bytes> ShareReadBytes(Bytes bytes, std::shared_ptr<const void> keep_alive);

// One serialized ReadResponse: `data` the `size` bytes of `bytes` from `offset` (within
// them), and `total_bytes` when set. The message shares the bytes (Note [Read chunks
// sent from the read's bytes]) unless SentShared says otherwise.
grpc::ByteBuffer ReadChunkMessage(const std::shared_ptr<const Bytes>& bytes, uint64_t offset,
                                  uint64_t size, std::optional<uint64_t> total_bytes);

// Whether `size` bytes of `bytes` are sent as a slice that shares them rather than
// copied: not when they are few, nor when they are pinned.
bool SentShared(const Bytes& bytes, uint64_t size);

// A slice of the `size` bytes of `bytes` from `offset`, which holds a share of them until
// gRPC drops it.
grpc::Slice SharedSlice(const std::shared_ptr<const Bytes>& bytes, uint64_t offset,
                        uint64_t size);

// The most bytes WriteReadResponseHead writes.
inline constexpr size_t kReadResponseHeadMaxBytes = 24;

// Writes at `target` the fields of a serialized ReadResponse that precede its `size`
// bytes of data, the last of the message: `total_bytes` when set (and not zero, as
// proto3 writes it), then the data's tag and length (none when `size` is zero). Returns
// the end of what it wrote.
uint8_t* WriteReadResponseHead(uint64_t size, std::optional<uint64_t> total_bytes,
                               uint8_t* target);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_READ_CHUNKS_H_
