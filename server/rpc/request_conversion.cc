#include "server/rpc/request_conversion.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/request_validation.h"

namespace gpucmd {
namespace {

// A buffer named by handle, or by the sequence of an earlier Allocate of the batch.
absl::StatusOr<BufferRef> ToBufferRef(bool by_ref, uint64_t buffer, uint64_t ref,
                                      const BatchAllocations& earlier) {
  if (!by_ref) return BufferRef{.id = buffer};
  absl::StatusOr<size_t> index = earlier.Find(ref);
  if (!index.ok()) return index.status();
  return BufferRef{.batch_index = *index};
}

// CUDA's dim3: an unset y or z is 1.
Dim3 ToDim3(const v1::Dim3& dim) {
  return Dim3{dim.x(), dim.y() == 0 ? 1 : dim.y(), dim.z() == 0 ? 1 : dim.z()};
}

absl::Status CheckGrid(const Dim3& grid, const DeviceDescription& device) {
  if (grid.x > device.max_grid_x || grid.y > device.max_grid_y || grid.z > device.max_grid_z) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grid (", grid.x, ",", grid.y, ",", grid.z, ") exceeds the device's limit (",
        device.max_grid_x, ",", device.max_grid_y, ",", device.max_grid_z, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BufferAccess> ToAccess(v1::Access access, size_t argument) {
  switch (access) {
    case v1::ACCESS_READ:
      return BufferAccess::kRead;
    case v1::ACCESS_WRITE:
      return BufferAccess::kWrite;
    case v1::ACCESS_UNSPECIFIED:  // the safe assumption
    case v1::ACCESS_READ_WRITE:
      return BufferAccess::kReadWrite;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("argument ", argument, ": access ",
                                                 static_cast<int>(access),
                                                 " is not a gpucmd.v1.Access value"));
}

absl::StatusOr<TensorMapSpec> ToTensorMapSpec(const v1::TensorMapArg& map, size_t argument) {
  static constexpr TensorDataType kTypes[] = {
      TensorDataType::kF32,  // unspecified: the common case
      TensorDataType::kU8,  TensorDataType::kU16, TensorDataType::kU32, TensorDataType::kI32,
      TensorDataType::kU64, TensorDataType::kI64, TensorDataType::kF16, TensorDataType::kF32,
      TensorDataType::kF64, TensorDataType::kBF16};
  static constexpr TensorSwizzle kSwizzles[] = {TensorSwizzle::kNone, TensorSwizzle::k32B,
                                                TensorSwizzle::k64B, TensorSwizzle::k128B};
  if (!v1::TensorDataType_IsValid(map.data_type())) {
    return absl::InvalidArgumentError(absl::StrCat("argument ", argument, ": data_type ",
                                                   static_cast<int>(map.data_type()),
                                                   " is not a gpucmd.v1.TensorDataType value"));
  }
  if (!v1::TensorSwizzle_IsValid(map.swizzle())) {
    return absl::InvalidArgumentError(absl::StrCat("argument ", argument, ": swizzle ",
                                                   static_cast<int>(map.swizzle()),
                                                   " is not a gpucmd.v1.TensorSwizzle value"));
  }
  TensorMapSpec spec;
  spec.data_type = kTypes[map.data_type()];
  spec.swizzle = kSwizzles[map.swizzle()];
  spec.global_dims.assign(map.global_dims().begin(), map.global_dims().end());
  spec.global_strides_bytes.assign(map.global_strides_bytes().begin(),
                                   map.global_strides_bytes().end());
  spec.box_dims.assign(map.box_dims().begin(), map.box_dims().end());
  spec.element_strides.assign(map.element_strides().begin(), map.element_strides().end());
  return spec;
}

// The value's bits in the low bytes of a 64-bit slot.
template <typename T>
uint64_t SlotBits(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(value));
  return bits;
}

void SetScalar(const v1::ScalarArg& scalar, LaunchArgument* out) {
  out->kind = ParamKind::kScalar;
  switch (scalar.value_case()) {
    case v1::ScalarArg::kI32:
      out->scalar = ScalarKind::kI32;
      out->bits = SlotBits(scalar.i32());
      break;
    case v1::ScalarArg::kU32:
      out->scalar = ScalarKind::kU32;
      out->bits = SlotBits(scalar.u32());
      break;
    case v1::ScalarArg::kI64:
      out->scalar = ScalarKind::kI64;
      out->bits = SlotBits(scalar.i64());
      break;
    case v1::ScalarArg::kU64:
      out->scalar = ScalarKind::kU64;
      out->bits = SlotBits(scalar.u64());
      break;
    case v1::ScalarArg::kF32:
      out->scalar = ScalarKind::kF32;
      out->bits = SlotBits(scalar.f32());
      break;
    case v1::ScalarArg::kF64:
      out->scalar = ScalarKind::kF64;
      out->bits = SlotBits(scalar.f64());
      break;
    case v1::ScalarArg::VALUE_NOT_SET:
      break;
  }
}

// A buffer (or tensor-map) argument's buffer, offset and access.
absl::Status SetBuffer(const v1::BufferArg& buffer, size_t argument,
                       const BatchAllocations& earlier, LaunchArgument* out, BufferRef* ref) {
  ASSIGN_OR_RETURN(*ref, ToBufferRef(buffer.has_buffer_ref(), buffer.buffer(),
                                     buffer.buffer_ref(), earlier));
  ASSIGN_OR_RETURN(out->access, ToAccess(buffer.access(), argument));
  out->buffer = ref->id;
  out->offset_bytes = buffer.offset_bytes();
  return absl::OkStatus();
}

// The layout of a write whose header passed its checks.
// The bytes a write takes from the host: inline, or from its shared-memory slice.
uint64_t WriteSourceBytes(const v1::WriteHeader& header) {
  return header.has_shared_memory() ? header.shared_memory().size_bytes()
                                    : header.inline_size_bytes();
}

CopyLayout WriteLayout(const v1::WriteHeader& header) {
  if (!header.has_pitched()) {
    return CopyLayout::Contiguous(header.offset_bytes(), WriteSourceBytes(header));
  }
  const v1::PitchedLayout& pitched = header.pitched();
  return CopyLayout::Pitched(header.offset_bytes(), pitched.width_bytes(), pitched.height(),
                             pitched.stride_bytes());
}

// The range a read or a fill names: offset_bytes, and size_bytes or a pitched layout.
template <typename RangeRequest>
CopyLayout RangeLayout(const RangeRequest& request) {
  if (request.has_pitched()) {
    const v1::PitchedLayout& pitched = request.pitched();
    return CopyLayout::Pitched(request.offset_bytes(), pitched.width_bytes(), pitched.height(),
                               pitched.stride_bytes());
  }
  return CopyLayout::Contiguous(request.offset_bytes(), request.size_bytes());
}

v1::ArgKind ToProto(ParamKind kind) {
  switch (kind) {
    case ParamKind::kBuffer:
      return v1::ARG_KIND_BUFFER;
    case ParamKind::kScalar:
      return v1::ARG_KIND_SCALAR;
    case ParamKind::kTensorMap:
      return v1::ARG_KIND_TENSOR_MAP;
  }
  return v1::ARG_KIND_UNSPECIFIED;
}

v1::ScalarType ToProto(ScalarKind kind) {
  switch (kind) {
    case ScalarKind::kI32:
      return v1::SCALAR_TYPE_I32;
    case ScalarKind::kU32:
      return v1::SCALAR_TYPE_U32;
    case ScalarKind::kI64:
      return v1::SCALAR_TYPE_I64;
    case ScalarKind::kU64:
      return v1::SCALAR_TYPE_U64;
    case ScalarKind::kF32:
      return v1::SCALAR_TYPE_F32;
    case ScalarKind::kF64:
      return v1::SCALAR_TYPE_F64;
    case ScalarKind::kNone:
      break;
  }
  return v1::SCALAR_TYPE_UNSPECIFIED;
}

template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

}  // namespace

absl::StatusOr<Bytes> SessionRegions::Slice(const v1::SharedMemorySlice& slice) const {
  return table->Slice(session, slice.region(), slice.offset_bytes(), slice.size_bytes());
}

void BatchAllocations::Add(uint64_t sequence, size_t index) {
  auto [it, added] = index_by_sequence_.emplace(sequence, index);
  if (!added) it->second = kAmbiguous;
}

absl::StatusOr<size_t> BatchAllocations::Find(uint64_t sequence) const {
  auto it = index_by_sequence_.find(sequence);
  if (it == index_by_sequence_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer_ref ", sequence,
        " names no earlier Allocate of this batch (references work inside one Submit "
        "batch only)"));
  }
  if (it->second == kAmbiguous) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer_ref ", sequence, " is ambiguous: several Allocates of this batch have it"));
  }
  return it->second;
}

absl::string_view KindOf(const v1::Command& command) {
  switch (command.command_case()) {
    case v1::Command::kAllocate:
      return "allocate";
    case v1::Command::kFree:
      return "free";
    case v1::Command::kWrite:
      return "write";
    case v1::Command::kRead:
      return "read";
    case v1::Command::kCopy:
      return "copy";
    case v1::Command::kFill:
      return "fill";
    case v1::Command::kCompile:
      return "compile";
    case v1::Command::kLaunch:
      return "launch";
    case v1::Command::kSynchronize:
      return "synchronize";
    case v1::Command::COMMAND_NOT_SET:
      break;
  }
  return "empty";
}

const std::string& SessionOf(const v1::Command& command) {
  switch (command.command_case()) {
    case v1::Command::kAllocate:
      return command.allocate().session();
    case v1::Command::kFree:
      return command.free().session();
    case v1::Command::kWrite:
      return command.write().header().session();
    case v1::Command::kRead:
      return command.read().session();
    case v1::Command::kCopy:
      return command.copy().session();
    case v1::Command::kFill:
      return command.fill().session();
    case v1::Command::kCompile:
      return command.compile().session();
    case v1::Command::kLaunch:
      return command.launch().session();
    case v1::Command::kSynchronize:
      return command.synchronize().session();
    case v1::Command::COMMAND_NOT_SET:
      break;
  }
  static const std::string* const kNone = new std::string();
  return *kNone;
}

std::vector<BufferRef> WrittenBuffers(const v1::Command& command,
                                      const BatchAllocations& earlier) {
  std::vector<BufferRef> writes;
  auto add = [&](bool by_ref, uint64_t buffer, uint64_t ref) {
    if (absl::StatusOr<BufferRef> named = ToBufferRef(by_ref, buffer, ref, earlier); named.ok()) {
      writes.push_back(*named);
    }
  };
  switch (command.command_case()) {
    case v1::Command::kWrite: {
      const v1::WriteHeader& header = command.write().header();
      add(header.has_buffer_ref(), header.buffer(), header.buffer_ref());
      break;
    }
    case v1::Command::kCopy: {
      const v1::CopyRequest& copy = command.copy();
      add(copy.has_target_buffer_ref(), copy.target_buffer(), copy.target_buffer_ref());
      break;
    }
    case v1::Command::kFill: {
      const v1::FillRequest& fill = command.fill();
      add(fill.has_buffer_ref(), fill.buffer(), fill.buffer_ref());
      break;
    }
    case v1::Command::kLaunch:
      for (const v1::KernelArg& arg : command.launch().args()) {
        const v1::BufferArg* buffer = arg.has_buffer()       ? &arg.buffer()
                                      : arg.has_tensor_map() ? &arg.tensor_map().buffer()
                                                             : nullptr;
        if (buffer != nullptr && buffer->access() != v1::ACCESS_READ) {
          add(buffer->has_buffer_ref(), buffer->buffer(), buffer->buffer_ref());
        }
      }
      break;
    default:
      break;
  }
  return writes;
}

absl::Status CheckShape(const v1::Command& command) {
  switch (command.command_case()) {
    case v1::Command::kAllocate:
      return ValidateAllocate(command.allocate());
    case v1::Command::kFree:
      return ValidateSessionToken(command.free().session());
    case v1::Command::kWrite:
      return ValidateWriteHeader(command.write().header());
    case v1::Command::kRead:
      return ValidateRead(command.read());
    case v1::Command::kCopy:
      return ValidateCopy(command.copy());
    case v1::Command::kFill:
      return ValidateFill(command.fill());
    case v1::Command::kCompile:
      return ValidateCompile(command.compile());
    case v1::Command::kLaunch:
      return ValidateLaunch(command.launch());
    case v1::Command::kSynchronize:
      return ValidateSessionToken(command.synchronize().session());
    case v1::Command::COMMAND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("empty command: set one of its kinds");
}

absl::StatusOr<Operation> ToOperation(const v1::AllocateRequest& request) {
  RETURN_IF_ERROR(ValidateAllocate(request));
  return AllocateOp{.size_bytes = request.size_bytes()};
}

absl::StatusOr<Operation> ToOperation(const v1::FreeRequest& request,
                                      const BatchAllocations& earlier) {
  RETURN_IF_ERROR(ValidateSessionToken(request.session()));
  ASSIGN_OR_RETURN(BufferRef buffer, ToBufferRef(request.has_buffer_ref(), request.buffer(),
                                                 request.buffer_ref(), earlier));
  return FreeOp{.buffer = buffer};
}

absl::Status CheckWriteHeader(const v1::WriteHeader& header, const DeviceDescription& device) {
  RETURN_IF_ERROR(ValidateWriteHeader(header));
  const uint64_t size = WriteSourceBytes(header);
  if (size > device.memory_capacity_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("write of ", size,
                                                   " bytes exceeds the device's ",
                                                   device.memory_capacity_bytes, " bytes"));
  }
  if (header.has_pitched()) {
    CopyLayout layout = WriteLayout(header);
    if (layout.host_bytes() != size) {
      return absl::InvalidArgumentError(absl::StrCat("pitched write carries ", size,
                                                     " bytes but its layout holds ",
                                                     layout.host_bytes()));
    }
  }
  return absl::OkStatus();
}

// The write `header` names, without its source.
absl::StatusOr<WriteOp> WriteOpOf(const v1::WriteHeader& header,
                                  const BatchAllocations& earlier) {
  ASSIGN_OR_RETURN(BufferRef buffer, ToBufferRef(header.has_buffer_ref(), header.buffer(),
                                                 header.buffer_ref(), earlier));
  return WriteOp{.stream = header.stream(),
                 .buffer = buffer,
                 .layout = WriteLayout(header),
                 .answer_when_copied = header.answer_when_copied()};
}

absl::StatusOr<Operation> ToOverBudgetWrite(const v1::WriteHeader& header,
                                            const DeviceDescription& device,
                                            absl::Status refusal) {
  RETURN_IF_ERROR(CheckWriteHeader(header, device));
  ASSIGN_OR_RETURN(WriteOp write, WriteOpOf(header, BatchAllocations()));
  write.over_budget = std::move(refusal);
  return write;
}

absl::StatusOr<Operation> ToOperation(const v1::WriteHeader& header, std::string data,
                                      const DeviceDescription& device,
                                      const BatchAllocations& earlier,
                                      const SessionRegions& regions) {
  RETURN_IF_ERROR(CheckWriteHeader(header, device));
  if (data.size() != header.inline_size_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("write declared ",
                                                   header.inline_size_bytes(),
                                                   " bytes but carries ", data.size()));
  }
  ASSIGN_OR_RETURN(WriteOp write, WriteOpOf(header, earlier));
  if (header.has_shared_memory()) {
    ASSIGN_OR_RETURN(write.shared, regions.Slice(header.shared_memory()));
  } else {
    write.data = std::move(data);
  }
  return write;
}

absl::StatusOr<Operation> ToOperation(const v1::ReadRequest& request,
                                      const BatchAllocations& earlier,
                                      const SessionRegions& regions) {
  RETURN_IF_ERROR(ValidateRead(request));
  const CopyLayout layout = RangeLayout(request);
  ASSIGN_OR_RETURN(BufferRef buffer, ToBufferRef(request.has_buffer_ref(), request.buffer(),
                                                 request.buffer_ref(), earlier));
  ReadOp read{.stream = request.stream(), .buffer = buffer, .layout = layout};
  if (request.has_shared_memory()) {
    if (request.shared_memory().size_bytes() != layout.host_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "read of ", layout.host_bytes(), " bytes into a shared-memory slice of ",
          request.shared_memory().size_bytes()));
    }
    ASSIGN_OR_RETURN(read.into, regions.Slice(request.shared_memory()));
  }
  return read;
}

absl::StatusOr<Operation> ToOperation(const v1::CopyRequest& request,
                                      const BatchAllocations& earlier) {
  RETURN_IF_ERROR(ValidateCopy(request));
  ASSIGN_OR_RETURN(BufferRef source,
                   ToBufferRef(request.has_source_buffer_ref(), request.source_buffer(),
                               request.source_buffer_ref(), earlier));
  ASSIGN_OR_RETURN(BufferRef target,
                   ToBufferRef(request.has_target_buffer_ref(), request.target_buffer(),
                               request.target_buffer_ref(), earlier));
  DeviceCopyLayout layout = DeviceCopyLayout::Contiguous(
      request.source_offset_bytes(), request.target_offset_bytes(), request.size_bytes());
  if (request.has_pitched()) {
    const v1::PitchedCopyRows& rows = request.pitched();
    layout.width_bytes = rows.width_bytes();
    layout.height = rows.height();
    layout.source_stride_bytes = rows.source_stride_bytes();
    layout.target_stride_bytes = rows.target_stride_bytes();
  }
  return CopyOp{.stream = request.stream(), .source = source, .target = target, .layout = layout};
}

absl::StatusOr<Operation> ToOperation(const v1::FillRequest& request,
                                      const BatchAllocations& earlier) {
  RETURN_IF_ERROR(ValidateFill(request));
  ASSIGN_OR_RETURN(BufferRef target, ToBufferRef(request.has_buffer_ref(), request.buffer(),
                                                 request.buffer_ref(), earlier));
  return FillOp{.stream = request.stream(),
                .target = target,
                .layout = RangeLayout(request),
                .pattern = {.value = request.value(),
                            .element_bytes = std::max(request.element_bytes(), 1u)}};
}

namespace {

// A valid launch request of `kernel` (its kernel_id, copied or taken out of it).
absl::StatusOr<Operation> LaunchOperation(const v1::LaunchRequest& request, KernelId kernel,
                                          const DeviceDescription& device,
                                          const BatchAllocations& earlier) {
  LaunchOp op;
  op.stream = request.stream();
  op.launch.kernel = std::move(kernel);
  op.launch.grid = ToDim3(request.grid());
  op.launch.block = ToDim3(request.block());
  RETURN_IF_ERROR(CheckGrid(op.launch.grid, device));
  op.launch.dynamic_shared_memory_bytes = request.dynamic_shared_memory_bytes();
  op.launch.args.resize(request.args_size());
  for (int i = 0; i < request.args_size(); ++i) {
    const v1::KernelArg& arg = request.args(i);
    LaunchArgument& out = op.launch.args[i];
    if (arg.arg_case() != v1::KernelArg::kScalar && op.buffers.empty()) {
      op.buffers.resize(request.args_size());
    }
    switch (arg.arg_case()) {
      case v1::KernelArg::kBuffer:
        out.kind = ParamKind::kBuffer;
        RETURN_IF_ERROR(SetBuffer(arg.buffer(), i, earlier, &out, &op.buffers[i]));
        break;
      case v1::KernelArg::kTensorMap: {
        if (!device.takes_tensor_maps) {
          return absl::InvalidArgumentError(absl::StrCat(
              "argument ", i, " is a tensor map; this device's driver does not take tensor "
              "maps (they need the CUDA driver)"));
        }
        out.kind = ParamKind::kTensorMap;
        RETURN_IF_ERROR(SetBuffer(arg.tensor_map().buffer(), i, earlier, &out, &op.buffers[i]));
        ASSIGN_OR_RETURN(out.tensor_map, ToTensorMapSpec(arg.tensor_map(), i));
        break;
      }
      case v1::KernelArg::kScalar:
        SetScalar(arg.scalar(), &out);
        break;
      case v1::KernelArg::ARG_NOT_SET:
        return absl::InvalidArgumentError(absl::StrCat("argument ", i, " is empty"));
    }
  }
  return op;
}

}  // namespace

absl::StatusOr<Operation> ToOperation(const v1::LaunchRequest& request,
                                      const DeviceDescription& device,
                                      const BatchAllocations& earlier) {
  RETURN_IF_ERROR(ValidateLaunch(request));
  return LaunchOperation(request, KernelId{request.kernel_id()}, device, earlier);
}

absl::StatusOr<Operation> ToOperation(const v1::SynchronizeRequest& request) {
  RETURN_IF_ERROR(ValidateSessionToken(request.session()));
  SynchronizeOp op;
  if (request.has_stream()) op.stream = request.stream();
  return op;
}

absl::StatusOr<Operation> ToOperation(v1::Command& command, const DeviceDescription& device,
                                      const BatchAllocations& earlier,
                                      const SessionRegions& regions) {
  switch (command.command_case()) {
    case v1::Command::kAllocate:
      return ToOperation(command.allocate());
    case v1::Command::kFree:
      return ToOperation(command.free(), earlier);
    case v1::Command::kWrite: {
      std::string data = std::move(*command.mutable_write()->mutable_data());
      return ToOperation(command.write().header(), std::move(data), device, earlier, regions);
    }
    case v1::Command::kRead:
      return ToOperation(command.read(), earlier, regions);
    case v1::Command::kCopy:
      return ToOperation(command.copy(), earlier);
    case v1::Command::kFill:
      return ToOperation(command.fill(), earlier);
    case v1::Command::kLaunch: {
      // CheckShape validated it.
      KernelId kernel{std::move(*command.mutable_launch()->mutable_kernel_id())};
      return LaunchOperation(command.launch(), std::move(kernel), device, earlier);
    }
    case v1::Command::kSynchronize:
      return ToOperation(command.synchronize());
    case v1::Command::kCompile:
      break;  // not a device operation
    case v1::Command::COMMAND_NOT_SET:
      return absl::InvalidArgumentError("empty command: set one of its kinds");
  }
  return absl::InternalError("a compile is not a device operation");
}

void PrepareLaunch(LaunchOp& launch, CompileCache& compiler) {
  absl::StatusOr<SharedKernelParams> params = compiler.ParamsOf(launch.launch.kernel);
  if (absl::IsNotFound(params.status())) {
    launch.refused = absl::FailedPreconditionError(absl::StrCat(
        "kernel ", launch.launch.kernel.hex, " is not compiled: call Compile first"));
  } else {
    // Or a failed compile's status: the launch is then skipped, its outputs tainted.
    launch.launch.params = std::move(params);
  }
}

void SetReplyStatus(const absl::Status& status, v1::CommandReply* reply) {
  if (status.ok()) {
    reply->clear_status();  // absent: code 0
    return;
  }
  reply->mutable_status()->set_code(static_cast<int>(status.code()));
  reply->mutable_status()->set_message(CapStatusMessage(std::string(status.message())));
}

bool RepliesWithReadBytes(const Operation& operation, const OperationResult& result) {
  const auto* read = std::get_if<ReadOp>(&operation);
  return read != nullptr && !read->into.has_value() && result.status.ok() &&
         result.read.has_value();
}

void FillReply(const Operation& operation, const OperationResult& result,
               v1::CommandReply* reply) {
  SetReplyStatus(result.status, reply);
  std::visit(
      Overloaded{
          [&](const AllocateOp&) {
            v1::AllocateResponse* allocate = reply->mutable_allocate();
            if (result.status.ok()) allocate->set_buffer(result.allocated);
          },
          [&](const FreeOp&) { reply->mutable_free(); },
          [&](const WriteOp&) { reply->mutable_write()->set_bytes_written(result.bytes_written); },
          [&](const ReadOp&) {
            if (RepliesWithReadBytes(operation, result)) return;
            v1::ReadResponse* read = reply->mutable_read();
            // Read into shared memory: the bytes are there, not in the reply.
            if (result.status.ok() && result.read.has_value()) {
              read->set_total_bytes(result.read->bytes.size());
            }
          },
          [&](const CopyOp&) { reply->mutable_copy(); },
          [&](const FillOp&) { reply->mutable_fill(); },
          [&](const LaunchOp&) { reply->mutable_launch(); },
          [&](const SynchronizeOp&) {
            reply->mutable_synchronize()->set_kernel_output(result.kernel_output);
          },
      },
      operation);
}

void FillCompileResponse(const KernelId& id, const absl::StatusOr<CompileCache::Result>& result,
                         v1::CompileResponse* response) {
  response->set_kernel_id(id.hex);
  if (!result.ok()) return;
  response->set_kernel_id(result->kernel.id.hex);
  response->set_cache_hit(result->cache_hit);
  response->set_log(result->kernel.log);
  for (const KernelParam& param : *result->kernel.params) {
    v1::KernelParam* out = response->add_params();
    out->set_kind(ToProto(param.kind));
    out->set_scalar_type(ToProto(param.scalar));
    out->set_declared_type(param.declared_type);
    out->set_read_only(param.read_only);
  }
}

}  // namespace gpucmd
