#include "server/rpc/submit_replies.h"

#include "google/protobuf/io/coded_stream.h"
#include "grpcpp/support/slice.h"

namespace gpucmd {
namespace {

using google::protobuf::io::CodedOutputStream;

// Wire-format tags of SubmitResponse's fields: (field number << 3) | wire type.
constexpr uint32_t kRepliesTag = (v1::SubmitResponse::kRepliesFieldNumber << 3) | 2;  // bytes
constexpr uint32_t kBatchDoneTag = (v1::SubmitResponse::kBatchDoneFieldNumber << 3) | 0;

// What `reply` takes inside a SubmitResponse (its tag, length and bytes); caches its size.
uint64_t FramedSize(const v1::CommandReply& reply) {
  const size_t size = reply.ByteSizeLong();
  return CodedOutputStream::VarintSize32(kRepliesTag) + CodedOutputStream::VarintSize64(size) +
         size;
}

}  // namespace

size_t RepliesThatFit(const v1::SubmitResponse& replies, size_t begin, size_t end,
                      uint64_t message_bytes) {
  uint64_t bytes = 0;
  size_t fit = begin;
  while (fit < end) {
    bytes += FramedSize(replies.replies(static_cast<int>(fit)));
    if (fit > begin && bytes > message_bytes) break;
    ++fit;
  }
  return fit;
}

grpc::ByteBuffer SerializeReplies(const v1::SubmitResponse& replies, size_t begin, size_t end,
                                  bool batch_done) {
  uint64_t total = 0;
  for (size_t i = begin; i < end; ++i) total += FramedSize(replies.replies(static_cast<int>(i)));
  if (batch_done) total += CodedOutputStream::VarintSize32(kBatchDoneTag) + 1;
  grpc::Slice slice(total);
  // A fresh slice of ours until it is handed to the ByteBuffer.
  auto* target = const_cast<uint8_t*>(slice.begin());
  for (size_t i = begin; i < end; ++i) {
    const v1::CommandReply& reply = replies.replies(static_cast<int>(i));
    target = CodedOutputStream::WriteVarint32ToArray(kRepliesTag, target);
    target = CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(reply.GetCachedSize()), target);
    target = reply.SerializeWithCachedSizesToArray(target);
  }
  if (batch_done) {
    target = CodedOutputStream::WriteVarint32ToArray(kBatchDoneTag, target);
    *target = 1;
  }
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace gpucmd
