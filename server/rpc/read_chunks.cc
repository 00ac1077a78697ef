#include "server/rpc/read_chunks.h"

#include <array>

#include "gpucmd/v1/gpucmd.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/slice.h"

namespace gpucmd {
namespace {

using google::protobuf::internal::WireFormatLite;

// Drops one slice's share of the read's bytes.
void DropShare(void* share) { delete static_cast<std::shared_ptr<const Bytes>*>(share); }

}  // namespace

std::shared_ptr<const Bytes> ShareReadBytes(Bytes bytes, std::shared_ptr<const void> keep_alive) {
  return std::shared_ptr<const Bytes>(
      new Bytes(std::move(bytes)),
      [keep_alive = std::move(keep_alive)](const Bytes* shared) { delete shared; });
}

bool SentShared(const Bytes& bytes, uint64_t size) {
  return size >= kSharedChunkMinBytes && !bytes.pinned();
}

grpc::Slice SharedSlice(const std::shared_ptr<const Bytes>& bytes, uint64_t offset,
                        uint64_t size) {
  return grpc::Slice(bytes->data() + offset, size, DropShare,
                     new std::shared_ptr<const Bytes>(bytes));
}

uint8_t* WriteReadResponseHead(uint64_t size, std::optional<uint64_t> total_bytes,
                               uint8_t* target) {
  // Fields as protobuf would write them, but for their order.
  if (total_bytes.value_or(0) != 0) {
    target = WireFormatLite::WriteUInt64ToArray(v1::ReadResponse::kTotalBytesFieldNumber,
                                                *total_bytes, target);
  }
  if (size == 0) return target;
  target = WireFormatLite::WriteTagToArray(v1::ReadResponse::kDataFieldNumber,
                                           WireFormatLite::WIRETYPE_LENGTH_DELIMITED, target);
  return google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(size, target);
}

grpc::ByteBuffer ReadChunkMessage(const std::shared_ptr<const Bytes>& bytes, uint64_t offset,
                                  uint64_t size, std::optional<uint64_t> total_bytes) {
  std::array<uint8_t, kReadResponseHeadMaxBytes> head;
  const size_t head_bytes = WriteReadResponseHead(size, total_bytes, head.data()) - head.data();
  grpc::Slice head_slice(head.data(), head_bytes);
  if (size == 0) return grpc::ByteBuffer(&head_slice, 1);
  std::array<grpc::Slice, 2> slices = {
      std::move(head_slice), SentShared(*bytes, size)
                                 ? SharedSlice(bytes, offset, size)
                                 : grpc::Slice(bytes->data() + offset, size)};
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace gpucmd
