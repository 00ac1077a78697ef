// SharedMemoryRegion (client.h): the client's half of Note [Shared-memory regions] in
// server/core/shared_memory.h.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/round_up.h"
#include "base/scoped_fd.h"
#include "base/send_descriptor.h"
#include "base/status_macros.h"
#include "client/client.h"

namespace gpucmd {

absl::StatusOr<std::string> HandOverDescriptor(const std::string& target, int fd) {
  absl::string_view grpc_socket = target;
  if (!absl::ConsumePrefix(&grpc_socket, "unix:")) {
    return absl::FailedPreconditionError(
        "shared memory needs a connection over the daemon's Unix socket");
  }
  const std::string path = absl::StrCat(grpc_socket, ".fds");
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ScopedFd connection(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (connection.get() < 0 ||
      connect(connection.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the descriptor socket ", path, ": ", strerror(errno)));
  }
  RETURN_IF_ERROR(SendDescriptor(connection.get(), fd));
  char reply[512];
  ssize_t size = recv(connection.get(), reply, sizeof(reply), 0);
  if (size < 1) return absl::UnavailableError("the descriptor socket closed without an answer");
  std::string text(reply + 1, static_cast<size_t>(size) - 1);
  if (reply[0] == 'T') return text;
  // A refusal's kind: gpucmd.proto, at RegisterSharedMemory.
  absl::StatusCode code = absl::StatusCode::kFailedPrecondition;
  if (reply[0] == 'I') code = absl::StatusCode::kInvalidArgument;
  if (reply[0] == 'R') code = absl::StatusCode::kResourceExhausted;
  return absl::Status(code, absl::StrCat("the daemon refused the memfd: ", text));
}

namespace {

// A memfd of at least `size_bytes` sealed against shrinking, and how many bytes it holds
// (whole huge pages in huge pages).
absl::StatusOr<std::pair<ScopedFd, uint64_t>> CreateSealedMemfd(uint64_t size_bytes,
                                                                bool huge_pages) {
  const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge_pages ? MFD_HUGETLB : 0u);
  ScopedFd memfd(memfd_create("gpucmd-region", flags));
  struct stat status;
  if (memfd.get() < 0 || fstat(memfd.get(), &status) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot create a memfd: ", strerror(errno)));
  }
  // A hugetlbfs file holds whole huge pages (st_blksize each).
  const uint64_t file_bytes =
      huge_pages ? RoundUp(size_bytes, static_cast<uint64_t>(status.st_blksize)) : size_bytes;
  if (ftruncate(memfd.get(), static_cast<off_t>(file_bytes)) != 0 ||
      fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot size a memfd to ", file_bytes, " bytes: ", strerror(errno)));
  }
  return std::make_pair(std::move(memfd), file_bytes);
}

}  // namespace

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::Create(Session& session,
                                                              uint64_t size_bytes,
                                                              RegionOptions options) {
  ASSIGN_OR_RETURN(auto created, CreateSealedMemfd(size_bytes, options.huge_pages));
  auto& [memfd, mapped_bytes] = created;
  void* mapped = mmap(nullptr, mapped_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
  if (mapped == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot map the memfd: ", strerror(errno),
        options.huge_pages ? " (are enough huge pages free? see vm.nr_hugepages)" : ""));
  }
  SharedMemoryRegion region(session.handle_, 0, static_cast<char*>(mapped), size_bytes,
                            mapped_bytes);
  const ClientConnection& connection = *session.handle_->connection;
  absl::StatusOr<std::string> token = HandOverDescriptor(connection.target, memfd.get());
  if (!token.ok()) return token.status();
  grpc::ClientContext context;
  connection.PrepareContext(&context);
  v1::RegisterSharedMemoryRequest request;
  request.set_session(session.token());
  request.set_handoff(*token);
  request.set_size_bytes(size_bytes);
  v1::RegisterSharedMemoryResponse response;
  absl::Status registered = FromGrpcStatus(
      connection.stub->RegisterSharedMemory(&context, request, &response));
  if (!registered.ok()) return registered;
  region.id_ = response.region();
  region.direct_device_access_ = response.direct_device_access();
  return region;
}

SharedMemoryRegion::SharedMemoryRegion(SharedMemoryRegion&& other) noexcept
    : session_(std::move(other.session_)),
      id_(std::exchange(other.id_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
      direct_device_access_(other.direct_device_access_) {}

SharedMemoryRegion::~SharedMemoryRegion() {
  // A closed session took its regions with it.
  if (session_ != nullptr && id_ != 0 && session_->open) {
    grpc::ClientContext context;
    session_->connection->PrepareContext(&context);
    v1::UnregisterSharedMemoryRequest request;
    request.set_session(session_->token);
    request.set_region(id_);
    v1::UnregisterSharedMemoryResponse response;
    session_->connection->stub->UnregisterSharedMemory(&context, request, &response);
  }
  if (data_ != nullptr) munmap(data_, mapped_bytes_);
}

}  // namespace gpucmd
