#include "server/rpc/submit_replies.h"

#include <array>
#include <cstring>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "grpcpp/support/slice.h"
#include "server/rpc/read_chunks.h"

namespace gpucmd {
namespace {

using google::protobuf::io::CodedOutputStream;

// Wire-format tags: (field number << 3) | wire type (2: length-delimited, 0: varint).
constexpr uint32_t kRepliesTag = (v1::SubmitResponse::kRepliesFieldNumber << 3) | 2;
constexpr uint32_t kBatchDoneTag = (v1::SubmitResponse::kBatchDoneFieldNumber << 3) | 0;
constexpr uint32_t kReadTag = (v1::CommandReply::kReadFieldNumber << 3) | 2;

// The most bytes WriteReadFieldHead writes: a tag, a length and a ReadResponse's head.
constexpr size_t kReadFieldHeadMaxBytes = 5 + 10 + kReadResponseHeadMaxBytes;

// The read's bytes of reply `index`, or null.
const Bytes* ReadBytesOf(const RepliesToSend& replies, size_t index) {
  return replies.read_bytes.empty() ? nullptr : replies.read_bytes[index].get();
}

// Writes at `target` what precedes `bytes` in their reply's `read` field: its tag and
// length, total_bytes, the data's tag and length. Returns the end of what it wrote.
uint8_t* WriteReadFieldHead(const Bytes& bytes, uint8_t* target) {
  std::array<uint8_t, kReadResponseHeadMaxBytes> head;
  const size_t head_bytes = WriteReadResponseHead(bytes.size(), bytes.size(), head.data()) -
                            head.data();
  target = CodedOutputStream::WriteVarint32ToArray(kReadTag, target);
  target = CodedOutputStream::WriteVarint64ToArray(head_bytes + bytes.size(), target);
  std::memcpy(target, head.data(), head_bytes);
  return target + head_bytes;
}

// Reply `index` as sent: its message, and the `read` field written from its read's bytes
// when it has them. Caches the message's size in it.
uint64_t ReplySize(const RepliesToSend& replies, size_t index) {
  uint64_t size = replies.replies.replies(static_cast<int>(index)).ByteSizeLong();
  if (const Bytes* read = ReadBytesOf(replies, index); read != nullptr) {
    std::array<uint8_t, kReadFieldHeadMaxBytes> head;
    size += (WriteReadFieldHead(*read, head.data()) - head.data()) + read->size();
  }
  return size;
}

// What a reply of `size` bytes takes inside a SubmitResponse: its tag, length and bytes.
uint64_t FramedSize(uint64_t size) {
  return CodedOutputStream::VarintSize32(kRepliesTag) + CodedOutputStream::VarintSize64(size) +
         size;
}

}  // namespace

size_t RepliesThatFit(const RepliesToSend& replies, size_t begin, size_t end,
                      uint64_t message_bytes) {
  uint64_t bytes = 0;
  size_t fit = begin;
  while (fit < end) {
    bytes += FramedSize(ReplySize(replies, fit));
    if (fit > begin && bytes > message_bytes) break;
    ++fit;
  }
  return fit;
}

grpc::ByteBuffer SerializeReplies(const RepliesToSend& replies, size_t begin, size_t end,
                                  bool batch_done) {
  std::vector<uint64_t> sizes(end - begin);
  uint64_t total = 0;
  uint64_t shared = 0;  // read bytes sent in slices of their own
  for (size_t i = begin; i < end; ++i) {
    sizes[i - begin] = ReplySize(replies, i);
    total += FramedSize(sizes[i - begin]);
    if (const Bytes* read = ReadBytesOf(replies, i);
        read != nullptr && SentShared(*read, read->size())) {
      shared += read->size();
    }
  }
  if (batch_done) total += CodedOutputStream::VarintSize32(kBatchDoneTag) + 1;
  grpc::Slice written(total - shared);
  // A fresh slice of ours until it is handed to the ByteBuffer.
  auto* const base = const_cast<uint8_t*>(written.begin());
  uint8_t* target = base;
  std::vector<grpc::Slice> slices;  // pieces of `written`, and shared read bytes between
  size_t piece_begin = 0;           // of `written`: what is not in `slices` yet
  for (size_t i = begin; i < end; ++i) {
    const v1::CommandReply& reply = replies.replies.replies(static_cast<int>(i));
    target = CodedOutputStream::WriteVarint32ToArray(kRepliesTag, target);
    target = CodedOutputStream::WriteVarint64ToArray(sizes[i - begin], target);
    target = reply.SerializeWithCachedSizesToArray(target);
    const Bytes* read = ReadBytesOf(replies, i);
    if (read == nullptr) continue;
    target = WriteReadFieldHead(*read, target);
    if (!SentShared(*read, read->size())) {
      if (read->size() != 0) std::memcpy(target, read->data(), read->size());
      target += read->size();
      continue;
    }
    const size_t piece_end = target - base;
    slices.push_back(written.sub(piece_begin, piece_end));
    slices.push_back(SharedSlice(replies.read_bytes[i], 0, read->size()));
    piece_begin = piece_end;
  }
  if (batch_done) {
    target = CodedOutputStream::WriteVarint32ToArray(kBatchDoneTag, target);
    *target++ = 1;
  }
  const size_t written_end = target - base;
  if (piece_begin < written_end || slices.empty()) {
    slices.push_back(written.sub(piece_begin, written_end));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace gpucmd
