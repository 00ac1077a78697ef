#include "client/read_messages.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/coded_bytes.h"
#include "base/huge_pages.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace gpucmd {
namespace {

using google::protobuf::internal::WireFormatLite;

constexpr uint32_t kDataTag = WireFormatLite::MakeTag(
    v1::ReadResponse::kDataFieldNumber, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
constexpr uint32_t kTotalBytesTag = WireFormatLite::MakeTag(
    v1::ReadResponse::kTotalBytesFieldNumber, WireFormatLite::WIRETYPE_VARINT);

// Reads the fields of `message` in order, handing each `data` field's length and the
// stream positioned at its bytes to `on_data`, which must consume exactly them (or return
// false); `total_bytes` lands in `total`. False when the message does not parse.
template <typename OnData>
bool ForEachField(grpc::ByteBuffer& message, uint64_t& total, OnData on_data) {
  grpc::ProtoBufferReader reader(&message);
  google::protobuf::io::CodedInputStream input(&reader);
  for (uint32_t tag = input.ReadTag(); tag != 0; tag = input.ReadTag()) {
    if (tag == kDataTag) {
      uint32_t size = 0;
      if (!input.ReadVarint32(&size) || !on_data(input, size)) return false;
    } else if (tag == kTotalBytesTag) {
      if (!input.ReadVarint64(&total)) return false;
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      return false;
    }
  }
  return input.ConsumedEntireMessage();
}

}  // namespace

const std::string& ReadMethodName() {
  static const std::string* const kName =
      new std::string(absl::StrCat("/", v1::GpuCommand::service_full_name(), "/Read"));
  return *kName;
}

absl::Status AppendReadMessage(grpc::ByteBuffer& message, bool first, std::string& result) {
  // First the sizes, the bytes skipped, so that the result is reserved once.
  uint64_t total = 0;
  uint64_t data_bytes = 0;
  const bool sized = ForEachField(message, total, [&](auto& input, uint32_t size) {
    data_bytes = size;
    return input.Skip(static_cast<int>(size));
  });
  if (!sized) return absl::InternalError("a Read answer from the daemon did not parse");
  const size_t kept = result.size();
  if (first) ReserveInHugePages(result, std::max(total, kept + data_bytes));
  const bool copied = ForEachField(message, total, [&](auto& input, uint32_t size) {
    result.resize(kept);  // a later `data` field replaces an earlier one, as in parsing
    return AppendRawBytes(input, size, result);
  });
  if (!copied) {
    result.resize(kept);
    return absl::InternalError("a Read answer from the daemon did not parse");
  }
  return absl::OkStatus();
}

absl::Status CopyReadMessage(grpc::ByteBuffer& message, absl::Span<std::byte> into,
                             size_t& filled) {
  const size_t room = into.size() - filled;
  uint64_t total = 0;
  uint64_t data_bytes = 0;
  const bool copied = ForEachField(message, total, [&](auto& input, uint32_t size) {
    data_bytes = size;  // a later `data` field replaces an earlier one, as in parsing
    return size <= room && input.ReadRaw(into.data() + filled, static_cast<int>(size));
  });
  if (!copied) {
    return absl::InternalError(
        "a Read answer from the daemon did not parse, or carried more bytes than asked");
  }
  filled += data_bytes;
  return absl::OkStatus();
}

}  // namespace gpucmd
