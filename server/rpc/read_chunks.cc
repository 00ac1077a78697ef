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

grpc::ByteBuffer ReadChunkMessage(const std::shared_ptr<const Bytes>& bytes, uint64_t offset,
                                  uint64_t size, std::optional<uint64_t> total_bytes) {
  // Fields as protobuf would write them, but for their order; fields left at zero are not
  // written, as proto3 does not.
  std::array<uint8_t, 24> framing;
  uint8_t* end = framing.data();
  if (total_bytes.value_or(0) != 0) {
    end = WireFormatLite::WriteUInt64ToArray(v1::ReadResponse::kTotalBytesFieldNumber,
                                             *total_bytes, end);
  }
  if (size == 0) {
    grpc::Slice header(framing.data(), end - framing.data());
    return grpc::ByteBuffer(&header, 1);
  }
  end = WireFormatLite::WriteTagToArray(v1::ReadResponse::kDataFieldNumber,
                                        WireFormatLite::WIRETYPE_LENGTH_DELIMITED, end);
  end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(size, end);
  std::byte* data = bytes->data() + offset;
  std::array<grpc::Slice, 2> slices = {
      grpc::Slice(framing.data(), end - framing.data()),
      size < kSharedChunkMinBytes || bytes->pinned()
          ? grpc::Slice(data, size)
          : grpc::Slice(data, size, DropShare, new std::shared_ptr<const Bytes>(bytes))};
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace gpucmd
