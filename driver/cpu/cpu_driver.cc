#include "driver/cpu/cpu_driver.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "base/round_up.h"
#include "base/status_macros.h"

namespace gpucmd {
namespace {

constexpr size_t kPinnedAlignmentBytes = 64;

std::byte* DevicePointer(const DeviceResource& resource, uint64_t offset) {
  return reinterpret_cast<std::byte*>(resource.address) + offset;
}

// Calls `part(offset, bytes)` for pieces covering [0, size), split between `engine`'s
// threads as CopyEngine::Split does (null: one piece on this thread).
void SplitBytes(uint64_t size, CopyEngine* engine,
                absl::FunctionRef<void(uint64_t offset, uint64_t bytes)> part) {
  if (engine != nullptr) {
    engine->Split(size, part);
  } else if (size > 0) {
    part(0, size);
  }
}

// Copies `size` bytes from `from` to `to` on `engine` (null: on this thread alone).
void CopyBytes(std::byte* to, const std::byte* from, uint64_t size, CopyEngine* engine) {
  if (engine != nullptr) {
    engine->Copy(to, from, size);
  } else {
    std::memcpy(to, from, size);
  }
}

// Calls `each_row(row)` for every row of the pitched `layout`, split between `engine`'s
// threads in parts of about CopyEngine::kPartBytes when the rows hold at least
// CopyEngine::kMinSplitBytes (null: all on this thread).
void ForEachRow(const CopyLayout& layout, CopyEngine* engine,
                absl::FunctionRef<void(uint64_t row)> each_row) {
  const bool split = engine != nullptr && layout.host_bytes() >= CopyEngine::kMinSplitBytes;
  const uint64_t rows_per_part =
      split ? std::max<uint64_t>(1, CopyEngine::kPartBytes / layout.width_bytes) : layout.height;
  auto rows_of_part = [&](size_t part) {
    const uint64_t end = std::min(layout.height, (part + 1) * rows_per_part);
    for (uint64_t row = part * rows_per_part; row < end; ++row) each_row(row);
  };
  if (split) {
    engine->Run((layout.height + rows_per_part - 1) / rows_per_part, rows_of_part);
  } else {
    rows_of_part(0);
  }
}

// Copies between packed host rows and a (possibly pitched) device region, on `engine`
// (null: on this thread alone); a large copy is split between its threads.
void CopyRows(std::byte* host, std::byte* device, const CopyLayout& layout, bool to_device,
              CopyEngine* engine) {
  if (layout.is_contiguous()) {
    to_device ? CopyBytes(device, host, layout.host_bytes(), engine)
              : CopyBytes(host, device, layout.host_bytes(), engine);
    return;
  }
  ForEachRow(layout, engine, [&](uint64_t row) {
    std::byte* host_row = host + row * layout.width_bytes;
    std::byte* device_row = device + row * layout.stride_bytes;
    to_device ? std::memcpy(device_row, host_row, layout.width_bytes)
              : std::memcpy(host_row, device_row, layout.width_bytes);
  });
}

// Copies of at most this many host bytes run on the enqueuing thread when their stream is
// idle (CpuStream::RunOrEnqueue): a few microseconds, less than waking the stream's worker.
constexpr uint64_t kBriefCopyBytes = uint64_t{64} << 10;

// Queues `work`, which moves or sets `bytes` bytes, on `stream`: a brief one runs here
// when the stream is idle.
void EnqueueBySize(CpuStream& stream, uint64_t bytes, CpuStream::Work work) {
  if (bytes <= kBriefCopyBytes) {
    stream.RunOrEnqueue(std::move(work));
  } else {
    stream.Enqueue(std::move(work));
  }
}

// Enqueues the copy between `host` and the device memory at `device` per `layout`.
void EnqueueCopy(std::byte* host, std::byte* device, const CopyLayout& layout, bool to_device,
                 CpuStream& stream) {
  EnqueueBySize(stream, layout.host_bytes(),
                [host, device, layout, to_device, engine = stream.copies()] {
                  CopyRows(host, device, layout, to_device, engine);
                  return absl::OkStatus();
                });
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const Options& options) {
  std::unique_ptr<CpuBackend> backend(new CpuBackend());
  backend->context_.ordinal = options.ordinal;
  absl::StatusOr<std::unique_ptr<CpuDeviceMemory>> memory =
      CpuDeviceMemory::Create(options.capacity_bytes, options.ordinal);
  if (!memory.ok()) return memory.status();
  backend->memory_ = *std::move(memory);
  backend->copies_ = std::make_unique<CopyEngine>(CopyEngine::HelpersForThisThread());
  for (int i = 0; i < options.stream_count; ++i) {
    backend->streams_.push_back(std::make_unique<CpuStream>(i, backend->copies_.get()));
  }
  backend->context_.modules = options.modules;
  backend->context_.pending_launches.resize(options.stream_count);
  for (int i = 0; i < options.stream_count && !options.executor_path.empty(); ++i) {
    const CpuDeviceMemory& device_memory = *backend->memory_;
    backend->context_.executors.push_back(std::make_unique<KernelExecutor>(KernelExecutor::Options{
        .executor_path = options.executor_path,
        .memfd = device_memory.memfd(),
        .base = reinterpret_cast<uint64_t>(device_memory.base()),
        .size_bytes = device_memory.capacity_bytes(),
        .workers = options.executor_workers,
        .kernel_timeout = options.kernel_timeout,
        .memory_bytes = options.executor_memory_bytes,
        .module_directory = options.modules.has_value() ? options.modules->directory() : "",
        .identity = options.executor_identity}));
  }
  return backend;
}

absl::StatusOr<HostResource> CpuBackend::AllocatePinned(uint64_t size_bytes) {
  uint64_t rounded = RoundUp(size_bytes, kPinnedAlignmentBytes);
  void* data = std::aligned_alloc(kPinnedAlignmentBytes, std::max<uint64_t>(rounded, 64));
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", size_bytes, " bytes of host staging memory"));
  }
  return HostResource{static_cast<std::byte*>(data), size_bytes};
}

void CpuBackend::FreePinned(const HostResource& resource) { std::free(resource.data); }

Bytes CpuDriver::PinnedBytes(PinnedBinding binding, HostResource resource, uint64_t size) {
  return PinnedPoolBytes(binding, resource, size);
}

absl::Status CpuDriver::CopyToHost(const DeviceResource& resource, const CopyLayout& layout,
                                   Bytes& bytes, Stream& stream) {
  EnqueueCopy(bytes.data(), DevicePointer(resource, layout.offset_bytes), layout,
              /*to_device=*/false, stream);
  return absl::OkStatus();
}

absl::Status CpuDriver::CopyToDevice(const DeviceResource& resource, const CopyLayout& layout,
                                     absl::Span<const std::byte> data, Stream& stream) {
  auto* host = const_cast<std::byte*>(data.data());  // only read: to_device
  EnqueueCopy(host, DevicePointer(resource, layout.offset_bytes), layout, /*to_device=*/true,
              stream);
  return absl::OkStatus();
}

absl::Status CpuDriver::CopyOnDevice(const DeviceResource& source, const DeviceResource& target,
                                     Stream::Signal signal) {
  if (source.size_bytes != target.size_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("relocation copy between ",
                                                   source.size_bytes, " and ",
                                                   target.size_bytes, " bytes"));
  }
  std::byte* from = DevicePointer(source, 0);
  std::byte* to = DevicePointer(target, 0);
  uint64_t size = source.size_bytes;
  signal->Enqueue([from, to, size, engine = signal->copies()] {
    CopyBytes(to, from, size, engine);
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status CpuDriver::CopyRowsOnDevice(const DeviceResource& source, const DeviceResource& target,
                                         const DeviceCopyLayout& rows, Stream::Signal signal) {
  const std::byte* from = DevicePointer(source, rows.source_offset_bytes);
  std::byte* to = DevicePointer(target, rows.target_offset_bytes);
  EnqueueBySize(*signal, rows.size_bytes(), [from, to, rows, engine = signal->copies()] {
    ForEachRow(rows.target(), engine, [&](uint64_t row) {
      std::memcpy(to + row * rows.target_stride_bytes, from + row * rows.source_stride_bytes,
                  rows.width_bytes);
    });
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

namespace {

// Sets the `size_bytes` bytes at `to` to `value`'s low bytes, an Element at a time.
template <typename Element>
void FillElements(std::byte* to, uint64_t size_bytes, uint32_t value) {
  std::fill_n(reinterpret_cast<Element*>(to), size_bytes / sizeof(Element),
              static_cast<Element>(value));
}

}  // namespace

absl::Status CpuDriver::FillOnDevice(const DeviceResource& target, const CopyLayout& layout,
                                     FillPattern pattern, Stream::Signal signal) {
  void (*fill)(std::byte*, uint64_t, uint32_t) = nullptr;
  switch (pattern.element_bytes) {
    case 1:
      fill = &FillElements<uint8_t>;
      break;
    case 2:
      fill = &FillElements<uint16_t>;
      break;
    case 4:
      fill = &FillElements<uint32_t>;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("a fill's elements are 1, 2 or 4 bytes, not ", pattern.element_bytes));
  }
  // Split between the copy engine's threads as a copy of as many bytes would be (in
  // parts of whole rows, or of CopyEngine::kPartBytes: whole elements either way).
  CpuStream::Work work = [fill, to = DevicePointer(target, layout.offset_bytes), layout,
                          value = pattern.value, engine = signal->copies()] {
    if (layout.is_contiguous()) {
      SplitBytes(layout.host_bytes(), engine,
                 [=](uint64_t offset, uint64_t bytes) { fill(to + offset, bytes, value); });
    } else {
      ForEachRow(layout, engine, [&](uint64_t row) {
        fill(to + row * layout.stride_bytes, layout.width_bytes, value);
      });
    }
    return absl::OkStatus();
  };
  // A brief fill runs where it is queued, as a brief copy does (it only writes).
  EnqueueBySize(*signal, layout.host_bytes(), std::move(work));
  return absl::OkStatus();
}

absl::Status CpuDriver::Launch(Context& context, Stream& stream, const KernelId& kernel,
                               Dim3 grid, LaunchArgs& args) {
  if (!args.spec.tensor_maps.empty()) {
    return absl::InvalidArgumentError("tensor-map arguments need the CUDA driver");
  }
  if (context.executors.empty()) {
    return absl::FailedPreconditionError("this CPU device runs no kernels (no executor)");
  }
  KernelExecutor* executor = context.executors[stream.index()].get();
  auto known = context.module_paths.find(kernel.hex);
  if (known == context.module_paths.end()) {
    ASSIGN_OR_RETURN(ModuleStore::Module found, FindModule(context.modules, kernel));
    known = context.module_paths
                .emplace(kernel.hex,
                         std::make_shared<const std::string>(std::move(found.artifact_path)))
                .first;
  }
  // The arguments are the request's own: `args` is spent.
  KernelExecutor::Request request{known->second,
                                  KernelDim3{grid.x, grid.y, grid.z},
                                  KernelDim3{args.spec.block.x, args.spec.block.y,
                                             args.spec.block.z},
                                  args.spec.dynamic_shared_memory_bytes,
                                  std::move(args.spec.slots),
                                  std::move(args.spec.buffers)};
  std::shared_ptr<PendingLaunches>& group = context.pending_launches[stream.index()];
  const uint64_t owner = args.spec.owner;
  if (group != nullptr &&
      group->TryAdd(owner, stream.enqueued(), std::move(request), args.spec.outcome,
                    args.spec.output)) {
    return absl::OkStatus();
  }
  group = std::make_shared<PendingLaunches>(owner, stream.enqueued() + 1);
  group->TryAdd(owner, stream.enqueued() + 1, std::move(request), args.spec.outcome,
                args.spec.output);
  stream.Enqueue([executor, group] { return group->Run(*executor); });
  return absl::OkStatus();
}

bool PendingLaunches::TryAdd(uint64_t owner, uint64_t stream_enqueued,
                             KernelExecutor::Request&& request,
                             std::shared_ptr<LaunchOutcome> outcome,
                             std::shared_ptr<KernelOutput> output) {
  MutexLock lock(&mutex_);
  if (owner != owner_ || started_ || stream_enqueued != position_ ||
      requests_.size() >= KernelExecutor::kMaxPipelined) {
    return false;
  }
  requests_.push_back(std::move(request));
  outcomes_.push_back(std::move(outcome));
  outputs_.push_back(std::move(output));
  return true;
}

absl::Status PendingLaunches::Run(KernelExecutor& executor) {
  std::vector<KernelExecutor::Request> requests;
  std::vector<std::shared_ptr<LaunchOutcome>> outcomes;
  std::vector<std::shared_ptr<KernelOutput>> outputs;
  {
    MutexLock lock(&mutex_);
    started_ = true;
    requests.swap(requests_);
    outcomes.swap(outcomes_);
    outputs.swap(outputs_);
  }
  std::vector<KernelExecutor::Result> results = executor.LaunchAll(requests);
  absl::Status first_error;
  for (size_t i = 0; i < results.size(); ++i) {
    // The output first: a Synchronize that sees the launch complete finds it there.
    if (outputs[i] != nullptr) outputs[i]->Append(results[i].output);
    if (outcomes[i] != nullptr) {
      outcomes[i]->Set(results[i].status);
    } else {
      first_error.Update(results[i].status);
    }
  }
  return first_error;
}

}  // namespace gpucmd
