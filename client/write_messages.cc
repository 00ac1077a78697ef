#include "client/write_messages.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "grpcpp/support/slice.h"

namespace gpucmd {

const std::string& WriteMethodName() {
  static const std::string* const kName =
      new std::string(absl::StrCat("/", v1::GpuCommand::service_full_name(), "/Write"));
  return *kName;
}

grpc::ByteBuffer WriteMessage(const v1::WriteHeader* header, absl::string_view chunk) {
  using google::protobuf::internal::WireFormatLite;
  std::string prefix;
  {
    google::protobuf::io::StringOutputStream stream(&prefix);
    google::protobuf::io::CodedOutputStream out(&stream);
    if (header != nullptr) {
      out.WriteTag(WireFormatLite::MakeTag(v1::WriteRequest::kHeaderFieldNumber,
                                           WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
      out.WriteVarint64(header->ByteSizeLong());
      header->SerializeWithCachedSizes(&out);
    }
    if (!chunk.empty()) {  // as protobuf leaves out an empty field
      out.WriteTag(WireFormatLite::MakeTag(v1::WriteRequest::kDataFieldNumber,
                                           WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
      out.WriteVarint64(chunk.size());
    }
  }
  grpc::Slice slices[] = {grpc::Slice(prefix),
                          grpc::Slice(chunk.data(), chunk.size(), grpc::Slice::STATIC_SLICE)};
  return grpc::ByteBuffer(slices, chunk.empty() ? 1 : 2);
}

}  // namespace gpucmd
