#include "client/request_builders.h"

namespace gpucmd {

namespace {

void SetSlice(const RegionSlice& slice, v1::SharedMemorySlice* out) {
  out->set_region(slice.region.id());
  out->set_offset_bytes(slice.offset_bytes);
  out->set_size_bytes(slice.size_bytes);
}

// A read without its extent: where it starts.
v1::ReadRequest ReadFrom(const std::string& session, const Buffer& buffer, uint64_t offset,
                         uint64_t stream) {
  v1::ReadRequest request;
  request.set_session(session);
  request.set_stream(stream);
  request.set_buffer(buffer.id());
  request.set_offset_bytes(offset);
  return request;
}

// A write's header without its source: where its bytes land.
v1::WriteHeader WriteInto(const std::string& session, const Buffer& buffer, uint64_t offset,
                          uint64_t stream, const std::optional<Pitched>& pitched) {
  v1::WriteHeader header;
  header.set_session(session);
  header.set_stream(stream);
  header.set_buffer(buffer.id());
  header.set_offset_bytes(offset);
  if (pitched) *header.mutable_pitched() = PitchedLayoutOf(*pitched);
  return header;
}

}  // namespace

v1::ReadRequest ContiguousRead(const std::string& session, const Buffer& buffer, uint64_t offset,
                               uint64_t size, uint64_t stream) {
  v1::ReadRequest request = ReadFrom(session, buffer, offset, stream);
  request.set_size_bytes(size);
  return request;
}

v1::ReadRequest PitchedRead(const std::string& session, const Buffer& buffer, uint64_t offset,
                            const Pitched& rows, uint64_t stream) {
  v1::ReadRequest request = ReadFrom(session, buffer, offset, stream);
  *request.mutable_pitched() = PitchedLayoutOf(rows);
  return request;
}

v1::ReadRequest SharedRead(const std::string& session, const Buffer& buffer, uint64_t offset,
                           const RegionSlice& target, uint64_t stream,
                           const std::optional<Pitched>& pitched) {
  v1::ReadRequest request =
      pitched ? PitchedRead(session, buffer, offset, *pitched, stream)
              : ContiguousRead(session, buffer, offset, target.size_bytes, stream);
  SetSlice(target, request.mutable_shared_memory());
  return request;
}

v1::WriteHeader InlineWrite(const std::string& session, const Buffer& buffer, uint64_t offset,
                            uint64_t size, const std::optional<Pitched>& pitched, uint64_t stream) {
  v1::WriteHeader header = WriteInto(session, buffer, offset, stream, pitched);
  header.set_inline_size_bytes(size);
  return header;
}

v1::WriteHeader SharedWrite(const std::string& session, const Buffer& buffer, uint64_t offset,
                            const RegionSlice& source, uint64_t stream,
                            const std::optional<Pitched>& pitched) {
  v1::WriteHeader header = WriteInto(session, buffer, offset, stream, pitched);
  SetSlice(source, header.mutable_shared_memory());
  return header;
}

v1::CopyRequest CopyBetween(const std::string& session, const Buffer& source,
                            uint64_t source_offset, const Buffer& target, uint64_t target_offset,
                            uint64_t size_bytes, uint64_t stream) {
  v1::CopyRequest request;
  request.set_session(session);
  request.set_stream(stream);
  request.set_source_buffer(source.id());
  request.set_source_offset_bytes(source_offset);
  request.set_target_buffer(target.id());
  request.set_target_offset_bytes(target_offset);
  request.set_size_bytes(size_bytes);
  return request;
}

v1::CopyRequest PitchedCopyBetween(const std::string& session, const Buffer& source,
                                   uint64_t source_offset, const Buffer& target,
                                   uint64_t target_offset, const CopyRows& rows, uint64_t stream) {
  v1::CopyRequest request =
      CopyBetween(session, source, source_offset, target, target_offset, 0, stream);
  v1::PitchedCopyRows& pitched = *request.mutable_pitched();
  pitched.set_width_bytes(rows.width_bytes);
  pitched.set_height(rows.height);
  pitched.set_source_stride_bytes(rows.source_stride_bytes);
  pitched.set_target_stride_bytes(rows.target_stride_bytes);
  return request;
}

v1::PitchedLayout PitchedLayoutOf(const Pitched& rows) {
  v1::PitchedLayout layout;
  layout.set_width_bytes(rows.width_bytes);
  layout.set_height(rows.height);
  layout.set_stride_bytes(rows.stride_bytes);
  return layout;
}

v1::FillRequest FillOf(const std::string& session, const Buffer& buffer, uint64_t offset,
                       uint64_t size_bytes, uint32_t value, uint32_t element_bytes,
                       uint64_t stream) {
  v1::FillRequest request;
  request.set_session(session);
  request.set_stream(stream);
  request.set_buffer(buffer.id());
  request.set_offset_bytes(offset);
  request.set_size_bytes(size_bytes);
  request.set_value(value);
  request.set_element_bytes(element_bytes);
  return request;
}

v1::FillRequest PitchedFillOf(const std::string& session, const Buffer& buffer, uint64_t offset,
                              const Pitched& rows, uint32_t value, uint32_t element_bytes,
                              uint64_t stream) {
  v1::FillRequest request =
      FillOf(session, buffer, offset, /*size_bytes=*/0, value, element_bytes, stream);
  *request.mutable_pitched() = PitchedLayoutOf(rows);
  return request;
}

v1::LaunchRequest LaunchOf(const std::string& session, const std::string& kernel_id,
                           const LaunchShape& shape, const std::vector<v1::KernelArg>& args,
                           uint64_t stream) {
  v1::LaunchRequest request;
  request.set_session(session);
  request.set_stream(stream);
  request.set_kernel_id(kernel_id);
  *request.mutable_grid() = shape.grid;
  *request.mutable_block() = shape.block;
  request.set_dynamic_shared_memory_bytes(shape.dynamic_shared_memory_bytes);
  for (const v1::KernelArg& arg : args) *request.add_args() = arg;
  return request;
}

v1::SynchronizeRequest SynchronizeOf(const std::string& session, std::optional<uint64_t> stream) {
  v1::SynchronizeRequest request;
  request.set_session(session);
  if (stream) request.set_stream(*stream);
  return request;
}

}  // namespace gpucmd
