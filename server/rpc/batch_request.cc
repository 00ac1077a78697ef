#include "server/rpc/batch_request.h"

#include <climits>
#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/rpc/raw_messages.h"

namespace gpucmd {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

constexpr uint32_t kCommandsTag = WireFormatLite::MakeTag(
    v1::SubmitRequest::kCommandsFieldNumber, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
constexpr uint32_t kStreamRepliesTag = WireFormatLite::MakeTag(
    v1::SubmitRequest::kStreamRepliesFieldNumber, WireFormatLite::WIRETYPE_VARINT);

// Parses the next command, of `length` bytes, into `command`; false when it does not
// parse. A large one is first given a write whose data string is pooled.
bool ParseCommand(CodedInputStream& input, int length, PayloadPool& payloads,
                  v1::Command* command) {
  const bool pooled = static_cast<uint64_t>(length) >= PayloadPool::kMinCachedBytes;
  if (pooled) {
    std::string data = payloads.Take();
    data.clear();  // keeps its capacity
    *command->mutable_write()->mutable_data() = std::move(data);
  }
  const auto [limit, depth_left] = input.IncrementRecursionDepthAndPushLimit(length);
  if (depth_left < 0 || !command->MergePartialFromCodedStream(&input)) return false;
  // It ended at its limit, as it must, when it left the last tag alone: one that ended
  // at a tag of 0 or an end-group tag set it (the stream's ConsumedEntireMessage may
  // still say true from an earlier command, and cannot tell).
  const bool ended_at_limit = input.LastTagWas(kCommandsTag) && input.BytesUntilLimit() == 0;
  input.DecrementRecursionDepthAndPopLimit(limit);
  if (!ended_at_limit) return false;
  // A command that named no kind still holds the write given to it (as does one whose
  // write was empty: both mean nothing to run).
  if (pooled && command->has_write() && !command->write().has_header() &&
      command->write().data().empty()) {
    command->clear_command();
  }
  return true;
}

}  // namespace

absl::Status ParseBatch(grpc::ByteBuffer* buffer, PayloadPool& payloads,
                        v1::SubmitRequest* batch) {
  // No command of a smaller batch is large enough: protobuf parses it whole, in one go
  // (command by command costs a launch batch some 5% more of the daemon's time).
  if (buffer->Length() < PayloadPool::kMinCachedBytes) return ParseRequest(buffer, batch);
  const absl::Status unparsed = UnparsedRequestOf<v1::SubmitRequest>();
  grpc::ProtoBufferReader reader(buffer);
  if (!reader.status().ok()) return unparsed;
  {
    const int64_t size = static_cast<int64_t>(buffer->Length());
    CodedInputStream input(&reader);
    input.SetTotalBytesLimit(INT_MAX);
    while (input.CurrentPosition() < size) {
      const uint32_t tag = input.ReadTag();
      if (tag == 0) return unparsed;  // a tag of 0, or one that does not parse
      if (tag == kCommandsTag) {
        int length = 0;
        if (!input.ReadVarintSizeAsInt(&length) ||
            !ParseCommand(input, length, payloads, batch->add_commands())) {
          return unparsed;
        }
      } else if (tag == kStreamRepliesTag) {
        uint64_t value = 0;
        if (!input.ReadVarint64(&value)) return unparsed;
        batch->set_stream_replies(value != 0);
      } else if (!WireFormatLite::SkipField(&input, tag)) {  // unknown: dropped
        return unparsed;
      }
    }
  }
  buffer->Clear();
  return absl::OkStatus();
}

}  // namespace gpucmd
