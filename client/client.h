#ifndef GPUCMDD_CLIENT_CLIENT_H_
#define GPUCMDD_CLIENT_CLIENT_H_

// The C++ client library of gpucmdd: typed calls over the gpucmd.v1 stubs, returning
// absl::Status, with RAII sessions.
//
//   ASSIGN_OR_RETURN(auto client, gpucmd::Client::Connect("unix:/run/gpucmdd/gpucmdd.sock"));
//   ASSIGN_OR_RETURN(auto devices, client->ListDevices());
//
// Thread-safety: a Client may be shared by threads (gRPC channels and stubs are
// thread-safe). A Session belongs to one owner; it closes itself when destroyed.

#include <atomic>
#include <cstddef>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"

namespace gpucmd {

struct ClientOptions {
  // How long Connect waits for the daemon to accept the connection.
  std::chrono::milliseconds connect_timeout{5000};
  // Deadline of each call.
  std::chrono::milliseconds call_timeout{30000};
  // Largest message sent or received; match the daemon's limits.max_message_bytes. At
  // least kMinMessageBytes: a streamed write's messages carry their header beside a chunk.
  int max_message_bytes = 16 << 20;
  static constexpr int kMinMessageBytes = 64 << 10;
};

// The payload URL under which a failed Compile's status carries the kernel id.
inline constexpr char kKernelIdPayload[] = "gpucmd.v1/kernel_id";

// Converts a gRPC status to an absl::Status (same codes, same message).
absl::Status FromGrpcStatus(const grpc::Status& status);

// Turns "unix:PATH", "tcp:HOST:PORT" or "HOST:PORT" into a gRPC target.
std::string GrpcTarget(const std::string& target);
// INVALID_ARGUMENT, saying why, for an empty target, "unix:" without a path, or "tcp:"
// followed by anything but HOST:PORT (a port in 1..65535; an IPv6 host in brackets, as
// "tcp:[::1]:50051").
// Other targets are gRPC's to judge.
absl::Status ValidateTarget(const std::string& target);

class Client;
class Session;
class SubmitStream;
// A client's connection to the daemon, shared by the Client and its sessions: a session
// may outlive the Client that opened it.
struct ClientConnection {
  std::string target;  // as given to Connect
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::GpuCommand::Stub> stub;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;

  // Sets the call's deadline (options.call_timeout).
  void PrepareContext(grpc::ClientContext* context) const;
};

// What a session's buffers and regions hold of it: it stays where it is when the Session
// moves, and knows whether the session is still open (calls after Close still reach the
// daemon, which answers NOT_FOUND: it no longer knows the token). Buffers may be
// destroyed on other threads than the one closing their session.
struct SessionHandle {
  SessionHandle(std::shared_ptr<const ClientConnection> connection, std::string token)
      : connection(std::move(connection)), token(std::move(token)) {}

  const std::shared_ptr<const ClientConnection> connection;
  const std::string token;
  std::atomic<bool> open{true};
};

// A device buffer of a session; freed when destroyed. Moving the session keeps it valid;
// once the session closed, it is gone with it and destroying it does nothing.
class Buffer {
 public:
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer();

  uint64_t id() const { return id_; }
  uint64_t size_bytes() const { return size_bytes_; }
  // Frees now and reports the outcome; the destructor then does nothing.
  absl::Status Free();
  // Gives up ownership: the buffer lives until its session ends.
  uint64_t Release();

 private:
  friend class Session;
  Buffer(std::shared_ptr<const SessionHandle> session, uint64_t id, uint64_t size)
      : session_(std::move(session)), id_(id), size_bytes_(size) {}

  std::shared_ptr<const SessionHandle> session_;  // null once freed or released
  uint64_t id_;
  uint64_t size_bytes_;
};

// A pitched region: `height` rows of `width_bytes`, `stride_bytes` apart on the device.
struct Pitched {
  uint64_t width_bytes = 0;
  uint64_t height = 0;
  uint64_t stride_bytes = 0;
};

// Rows copied between device buffers: `height` rows of `width_bytes`, source rows
// `source_stride_bytes` apart, target rows `target_stride_bytes` apart.
struct CopyRows {
  uint64_t width_bytes = 0;
  uint64_t height = 0;
  uint64_t source_stride_bytes = 0;
  uint64_t target_stride_bytes = 0;
};

// When an inline Session::Write returns: once the daemon holds its bytes and queued the
// copy (the copy's failure is then the next Synchronize's), or once the copy completed,
// after the stream's earlier work, with its outcome: written and confirmed in one round
// trip (WriteHeader.answer_when_copied).
enum class WriteReturns { kWhenQueued, kWhenCopied };

struct RegionOptions {
  // In huge pages (a hugetlbfs memfd, MFD_HUGETLB): fewer TLB misses on both sides of a
  // bulk copy. The memfd takes whole huge pages; the system must have them free
  // (vm.nr_hugepages), else SharedMemoryRegion::Create is RESOURCE_EXHAUSTED.
  bool huge_pages = false;
};

// A memfd shared with the daemon (Note [Shared-memory regions] in
// server/core/shared_memory.h): created, sealed against shrinking, mapped here, handed
// over on the daemon's descriptor socket and registered for the session; unregistered
// and unmapped when destroyed. Writes and reads that name a slice of it move no bytes
// over gRPC. Needs a Unix-socket connection. Moving the session keeps it registered; once
// the session closed, the region is unregistered with it and destroying it only unmaps.
class SharedMemoryRegion {
 public:
  static absl::StatusOr<SharedMemoryRegion> Create(Session& session, uint64_t size_bytes,
                                                   RegionOptions options = {});
  SharedMemoryRegion(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion& operator=(SharedMemoryRegion&&) = delete;
  ~SharedMemoryRegion();

  uint64_t id() const { return id_; }
  uint64_t size_bytes() const { return size_bytes_; }
  char* data() const { return data_; }
  // Whether the device copies straight from and into the region (see
  // RegisterSharedMemoryResponse.direct_device_access).
  bool direct_device_access() const { return direct_device_access_; }

 private:
  SharedMemoryRegion(std::shared_ptr<const SessionHandle> session, uint64_t id, char* data,
                     uint64_t size, uint64_t mapped_bytes)
      : session_(std::move(session)),
        id_(id),
        data_(data),
        size_bytes_(size),
        mapped_bytes_(mapped_bytes) {}
  std::shared_ptr<const SessionHandle> session_;
  uint64_t id_;
  char* data_;
  uint64_t size_bytes_;
  uint64_t mapped_bytes_;  // size_bytes_, or whole huge pages
  bool direct_device_access_ = false;
};

// Hands `fd` to the daemon at `target` ("unix:PATH") over its descriptor socket
// (PATH.fds) and returns the token RegisterSharedMemory names; the first step of
// SharedMemoryRegion::Create, for clients that manage their own memfds. The daemon's
// refusal: INVALID_ARGUMENT for a descriptor that is not a memfd sealed against
// shrinking, RESOURCE_EXHAUSTED at its limit of handoffs waiting for the user,
// FAILED_PRECONDITION otherwise; UNAVAILABLE when the socket cannot be reached.
absl::StatusOr<std::string> HandOverDescriptor(const std::string& target, int fd);

// `size_bytes` bytes at `offset_bytes` of a region.
struct RegionSlice {
  const SharedMemoryRegion& region;
  uint64_t offset_bytes = 0;
  uint64_t size_bytes = 0;
};

// Launch arguments.
v1::KernelArg BufferArgument(const Buffer& buffer, v1::Access access, uint64_t offset_bytes = 0);
v1::KernelArg Int32Argument(int32_t value);
v1::KernelArg UInt32Argument(uint32_t value);
v1::KernelArg Int64Argument(int64_t value);
v1::KernelArg UInt64Argument(uint64_t value);
v1::KernelArg FloatArgument(float value);
v1::KernelArg DoubleArgument(double value);

// A launch's shape.
struct LaunchShape {
  v1::Dim3 grid;
  v1::Dim3 block;
  uint32_t dynamic_shared_memory_bytes = 0;
};
v1::Dim3 MakeDim3(uint32_t x, uint32_t y = 1, uint32_t z = 1);

// An open session. It holds a lease stream to the daemon for its whole life, so the
// daemon reclaims everything if this process dies; closed when destroyed. It shares the
// connection of the Client that opened it, and may outlive that Client.
class Session {
 public:
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // Empty once moved from.
  const std::string& token() const;

  absl::StatusOr<Buffer> Allocate(uint64_t size_bytes);
  // Host -> device at `offset` (contiguous), or into a pitched region starting there.
  // Payloads above the message limit are streamed in chunks.
  absl::Status Write(const Buffer& buffer, uint64_t offset, absl::string_view data,
                     uint64_t stream = 0, std::optional<Pitched> pitched = std::nullopt,
                     WriteReturns returns = WriteReturns::kWhenQueued);
  // Host -> device from shared memory: the slice's bytes land at `offset` (or, packed
  // rows, as `pitched` lays them out from there). Returns once they did (WriteShared), so
  // the slice may be rewritten at once; earlier work on the stream finishes first.
  absl::Status Write(const Buffer& buffer, uint64_t offset, const RegionSlice& source,
                     uint64_t stream = 0, const std::optional<Pitched>& pitched = std::nullopt);
  absl::StatusOr<std::string> Read(const Buffer& buffer, uint64_t offset, uint64_t size,
                                   uint64_t stream = 0);
  // Device -> `into`, as many bytes as it holds, from `offset`: for callers that keep
  // their own memory (the Read above allocates the result for each call). Its bytes are
  // unspecified after an error.
  absl::Status Read(const Buffer& buffer, uint64_t offset, absl::Span<std::byte> into,
                    uint64_t stream = 0);
  // Device -> shared memory: the slice's size from `offset` lands in the slice (or
  // `pitched` rows from there, packed; the slice holds exactly their bytes).
  absl::Status Read(const Buffer& buffer, uint64_t offset, const RegionSlice& target,
                    uint64_t stream = 0, const std::optional<Pitched>& pitched = std::nullopt);
  // Reads a pitched region into packed rows.
  absl::StatusOr<std::string> ReadPitched(const Buffer& buffer, uint64_t offset,
                                          const Pitched& pitched, uint64_t stream = 0);
  absl::Status Copy(const Buffer& source, uint64_t source_offset, const Buffer& target,
                    uint64_t target_offset, uint64_t size_bytes, uint64_t stream = 0);
  // Copies `rows` from `source_offset` in `source` to `target_offset` in `target`, as
  // cudaMemcpy2DAsync between device pointers does: the padding between rows is left as
  // it is. Within one buffer, no byte read may be written.
  absl::Status Copy(const Buffer& source, uint64_t source_offset, const Buffer& target,
                    uint64_t target_offset, const CopyRows& rows, uint64_t stream = 0);
  // Sets `size_bytes` of `buffer` from `offset` to `value`, repeated in elements of
  // `element_bytes` (1, 2 or 4; little-endian) on the device, as cudaMemsetAsync and
  // cuMemsetD16/D32Async do: no bytes are sent. Answered once queued.
  absl::Status Fill(const Buffer& buffer, uint64_t offset, uint64_t size_bytes, uint32_t value,
                    uint32_t element_bytes = 1, uint64_t stream = 0);
  // The same over `rows` from `offset`, as cudaMemset2DAsync and cuMemsetD2D16/D32Async
  // do: each row's width_bytes set, the padding between rows left as it is. The width
  // and the stride are whole elements.
  absl::Status Fill(const Buffer& buffer, uint64_t offset, const Pitched& rows, uint32_t value,
                    uint32_t element_bytes = 1, uint64_t stream = 0);
  // Compiles `entry_point` of `source`; the response names the KernelId. A compile error
  // is INVALID_ARGUMENT carrying the compiler's whole log (fetched with CompileLog: the
  // status the daemon sends is cut to fit a header), with the kernel's id as the
  // kKernelIdPayload payload (launching it is then skipped and taints its outputs).
  absl::StatusOr<v1::CompileResponse> Compile(const std::string& source,
                                              const std::string& entry_point,
                                              const std::vector<std::string>& options = {});
  // The whole log of the compile of `kernel_id`: errors when it failed, else warnings.
  absl::StatusOr<v1::GetCompileLogResponse> CompileLog(const std::string& kernel_id);
  // Enqueues a compiled kernel on `stream`.
  absl::Status Launch(const std::string& kernel_id, const LaunchShape& shape,
                      const std::vector<v1::KernelArg>& args, uint64_t stream = 0);
  // Waits for the session's work on `stream` (every stream when absent). When
  // `kernel_output` is given, it gets what the session's kernels printed since the last
  // Synchronize (SynchronizeResponse.kernel_output).
  absl::Status Synchronize(std::optional<uint64_t> stream = std::nullopt,
                           std::string* kernel_output = nullptr);
  absl::StatusOr<v1::GetStatsResponse> Stats();

  // Closes now and reports the outcome; the destructor then does nothing.
  absl::Status Close();

 private:
  friend class Client;
  friend class Buffer;
  friend class SharedMemoryRegion;
  friend class SubmitStream;
  class Lease;
  Session(std::shared_ptr<const ClientConnection> connection, std::string token,
          std::unique_ptr<Lease> lease);
  static absl::Status FreeBuffer(const SessionHandle& session, uint64_t id);
  absl::StatusOr<std::string> ReadRequest(v1::ReadRequest request);
  absl::Status FillRequest(const v1::FillRequest& request);
  absl::Status CopyRequest(const v1::CopyRequest& request);
  // Sends `header` (the session filled in) and `data` in chunks.
  absl::Status WriteRequest(v1::WriteHeader header, absl::string_view data);

  std::shared_ptr<SessionHandle> handle_;  // null once moved from
  std::unique_ptr<Lease> lease_;
};

class Client {
 public:
  // Connects to `target` and waits until the channel is ready. UNAVAILABLE when the
  // daemon does not answer within options.connect_timeout.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& target,
                                                         const ClientOptions& options = {});

  // grpc.health.v1 status of `service` ("" for the whole daemon): true when SERVING.
  absl::StatusOr<bool> IsServing(const std::string& service = "");

  absl::StatusOr<std::vector<v1::DeviceInfo>> ListDevices();
  absl::StatusOr<v1::GetStatsResponse> GetStats(const std::string& session = "");
  // The open sessions this caller may see: every client's for an administrator, its
  // own otherwise (ListSessions in gpucmd.proto).
  absl::StatusOr<v1::ListSessionsResponse> ListSessions();

  // Opens a session on `device`.
  absl::StatusOr<Session> OpenSession(uint32_t device = 0,
                                      const std::string& client_name = "");

  // The raw stub, for RPCs the typed surface does not cover yet.
  v1::GpuCommand::Stub& stub() { return *connection_->stub; }

 private:
  explicit Client(std::shared_ptr<const ClientConnection> connection)
      : connection_(std::move(connection)) {}

  const std::shared_ptr<const ClientConnection> connection_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_CLIENT_H_
