#include "server/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <functional>

#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_posix.h"
#include "server/connection_quota.h"
#include "server/driver_setup.h"
#include "server/listen_address.h"
#include "server/restart_request.h"
#include "server/descriptor_socket.h"
#include "server/rpc/metrics_interceptor.h"
#include "server/rpc/peer_identity.h"
#include "server/rpc/submit_reactor.h"
#include "server/rpc/unparsed_request_interceptor.h"
#include "spdlog/spdlog.h"

namespace gpucmd {
namespace {

constexpr char kServiceName[] = "gpucmd.v1.GpuCommand";
// How long the refusal goes on once the devices are quiet and no call came or went, before
// gRPC's shutdown starts (Note [Draining]): time for a client whose call was just answered
// to send its next one and be told.
constexpr std::chrono::milliseconds kRefusalLinger{200};
// How often the drain looks whether the calls in flight are done.
constexpr std::chrono::milliseconds kDrainPoll{10};
// How long past the drain's end the devices may take to stop (Daemon::Shutdown).
constexpr std::chrono::milliseconds kDevicesStopGrace{800};
// The largest TLS certificate, key or CA bundle file read (a system's whole CA bundle is
// some 200 KiB).
constexpr uint64_t kMaxTlsFileBytes = uint64_t{4} << 20;

// The id of the group named `name`; FAILED_PRECONDITION naming `field` when none is.
absl::StatusOr<gid_t> GroupId(const std::string& name, absl::string_view field) {
  std::vector<char> buffer(16 << 10);
  struct group entry;
  struct group* found = nullptr;
  if (getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, " \"", name, "\" does not exist"));
  }
  return found->gr_gid;
}

// Gives the Unix socket at `path` its configured mode and group (a name; empty keeps the
// daemon's). FAILED_PRECONDITION naming what failed.
absl::Status SetSocketAccess(const std::string& path, uint32_t mode, const std::string& group) {
  if (!group.empty()) {
    ASSIGN_OR_RETURN(const gid_t gid, GroupId(group, "socket_group"));
    if (chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot give ", path, " to group ", group, ": ", std::strerror(errno)));
    }
  }
  if (chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot set the mode of ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Who sees every client's sessions; FAILED_PRECONDITION when the admin group does not
// exist.
absl::StatusOr<AdminPolicy> AdminPolicyOf(const v1::AdminConfig& admin) {
  AdminPolicy policy{.daemon_user = geteuid()};
  if (!admin.group().empty()) {
    ASSIGN_OR_RETURN(policy.group, GroupId(admin.group(), "admin.group"));
  }
  policy.subjects.assign(admin.client_subjects().begin(), admin.client_subjects().end());
  return policy;
}

// Sockets a service manager passed (socket activation); each is taken once, by the
// listener configured at its path.
class ActivatedSockets {
 public:
  ActivatedSockets() {
    const int count = sd_listen_fds(/*unset_environment=*/1);
    for (int i = 0; i < count; ++i) fds_.push_back(SD_LISTEN_FDS_START + i);
  }
  // Closes those no listener took.
  ~ActivatedSockets() {
    for (int fd : fds_) {
      spdlog::warn("socket activation passed descriptor {}, which no listen address names", fd);
      close(fd);
    }
  }

  // The passed socket of `type` listening at `path`, now the caller's; -1 when none.
  int Take(const std::string& path, int type) {
    for (auto it = fds_.begin(); it != fds_.end(); ++it) {
      if (sd_is_socket_unix(*it, type, /*listening=*/1, path.c_str(), 0) > 0) {
        const int fd = *it;
        fds_.erase(it);
        return fd;
      }
    }
    return -1;
  }

 private:
  std::vector<int> fds_;
};

// Counts `connection`, accepted on a gRPC Unix socket, against its user's quota (Note
// [Connections per client]); false when refused, the connection then closed and logged.
bool AdmitConnection(ConnectionQuota& quota, int connection) {
  bool first_refusal = false;
  absl::Status admitted = quota.Admit(connection, IdentifyUnixPeer(connection).Key(),
                                      &first_refusal);
  if (admitted.ok()) return true;
  close(connection);
  spdlog::log(first_refusal ? spdlog::level::warn : spdlog::level::debug,
              "refused a connection: {}", admitted.ToString());
  return false;
}

// Serves the Unix socket at `path` (the one passed for it, else bound here with the
// configured access), handing each connection to `handler`.
absl::StatusOr<std::unique_ptr<UnixListener>> ListenOnUnixSocket(
    const std::string& path, int type, ActivatedSockets& activated,
    const v1::DaemonConfig& config, UnixListener::Handler handler) {
  if (const int passed = activated.Take(path, type); passed >= 0) {
    return UnixListener::Adopt(passed, path, std::move(handler));
  }
  RETURN_IF_ERROR(ClaimUnixSocketPath(path, type));
  ASSIGN_OR_RETURN(std::unique_ptr<UnixListener> listener,
                   UnixListener::Bind(path, type, std::move(handler)));
  RETURN_IF_ERROR(SetSocketAccess(path, config.socket_mode(), config.socket_group()));
  return listener;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view field) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxTlsFileBytes);
  if (!text.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(field, ": ", text.status().message()));
  }
  return text;
}

// TLS when tls.cert_file is configured, else plaintext (meant for loopback).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(
    const v1::TlsConfig& tls) {
  if (tls.cert_file().empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadFile(tls.cert_file(), "tls.cert_file"));
  ASSIGN_OR_RETURN(pair.private_key, ReadFile(tls.key_file(), "tls.key_file"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca_file().empty()) {
    ASSIGN_OR_RETURN(options.pem_root_certs, ReadFile(tls.client_ca_file(), "tls.client_ca_file"));
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

// One worker per device, each running its driver's Command.
std::unique_ptr<ServerCore> StartCore(const v1::DaemonConfig& config, DriverSetup& setup,
                                      std::shared_ptr<PayloadPool> payloads, Metrics* metrics) {
  std::vector<std::unique_ptr<DeviceWorker>> workers;
  for (size_t ordinal = 0; ordinal < setup.factories.size(); ++ordinal) {
    workers.push_back(std::make_unique<DeviceWorker>(
        DeviceWorker::Options{
            .ordinal = static_cast<int>(ordinal),
            .queue_capacity = config.limits().device_queue_capacity(),
            .per_session_limit = config.limits().session_queued_commands(),
            .on_lost_for_good = config.keep_lost_devices_down()
                                    ? std::function<void(const absl::Status&)>()
                                    : [](const absl::Status&) { RequestRestart(); }},
        std::move(setup.factories[ordinal]), metrics));
  }
  const v1::LimitsConfig& limits = config.limits();
  return std::make_unique<ServerCore>(
      std::move(workers),
      ServerCore::Options{
          .idle_timeout = std::chrono::seconds(limits.session_idle_timeout_seconds()),
          .lease_grace = std::chrono::seconds(limits.session_lease_grace_seconds()),
          .session_limits = {.max_sessions = limits.max_sessions(),
                             .max_sessions_per_client = limits.max_sessions_per_client(),
                             .max_client_name_bytes = limits.max_client_name_bytes()},
          .inline_bytes_per_session = limits.max_inline_bytes_per_session(),
          .inline_bytes = limits.max_inline_bytes(),
          .submit_bytes = limits.max_submit_bytes(),
          .shared_memory = {.max_regions_per_session = limits.max_shared_memory_regions(),
                            .max_mapped_bytes = limits.max_shared_memory_bytes(),
                            .max_registered_bytes = limits.max_registered_shared_memory_bytes()},
          .payloads = std::move(payloads),
          .keep_freed_bytes = limits.payload_cache_bytes()});
}

// Every open session by client name, with the device memory it holds.
std::vector<Metrics::OpenSession> OpenSessions(const ServerCore& core) {
  std::vector<Metrics::OpenSession> open;
  for (const ServerCore::SessionWithUsage& session : core.SessionsWithUsage()) {
    open.push_back({.client = session.info.client_name,
                    .memory_bytes = session.usage.memory_used_bytes});
  }
  return open;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const v1::DaemonConfig& config) {
  std::unique_ptr<Daemon> daemon(new Daemon());
  daemon->config_ = config;
  auto payloads = std::make_shared<PayloadPool>(config.limits().payload_cache_bytes());
  ASSIGN_OR_RETURN(DriverSetup setup, SetUpDriver(config, payloads));
  daemon->device_count_ = static_cast<int>(setup.devices.size());
  daemon->metrics_ = std::make_unique<Metrics>(daemon->device_count_);
  daemon->compiler_ = std::move(setup.compiler);
  daemon->core_ = StartCore(config, setup, std::move(payloads), daemon->metrics_.get());
  ASSIGN_OR_RETURN(AdminPolicy admin, AdminPolicyOf(config.admin()));
  daemon->service_ = std::make_unique<GpuCommandService>(
      std::move(setup.devices), daemon->core_.get(), daemon->compiler_.get(),
      daemon->metrics_.get(), config.limits().max_message_bytes(), std::move(admin));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const int max_message = static_cast<int>(config.limits().max_message_bytes());
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(config.limits().max_calls_per_connection()));
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(config.limits().tcp_handshake_timeout_seconds()) * 1000);
  builder.RegisterService(daemon->service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  // First: the metrics count the status it rewrites.
  interceptors.push_back(std::make_unique<UnparsedRequestInterceptorFactory>());
  interceptors.push_back(std::make_unique<MetricsInterceptorFactory>(
      daemon->metrics_.get(), ServedMethods(), std::vector<std::string>{SubmitReactor::kMethod}));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));

  std::vector<ListenAddress> addresses;
  // gRPC writes each TCP listener's bound port here once the server starts.
  std::vector<std::unique_ptr<int>> tcp_ports;
  ActivatedSockets activated;
  for (const std::string& text : config.listen()) {
    ASSIGN_OR_RETURN(ListenAddress address, ParseListenAddress(text));
    if (address.kind == ListenAddress::Kind::kUnix) {
      tcp_ports.push_back(nullptr);  // served by a UnixListener once the server runs
    } else {
      ASSIGN_OR_RETURN(auto credentials, TcpCredentials(config.tls()));
      tcp_ports.push_back(std::make_unique<int>(0));
      builder.AddListeningPort(address.GrpcUri(), credentials, tcp_ports.back().get());
    }
    addresses.push_back(std::move(address));
  }
  ASSIGN_OR_RETURN(daemon->descriptor_server_,
                   DescriptorSocketServer::Start(&daemon->core_->handoffs(),
                                                 DescriptorSocketServer::Limits()));
  daemon->server_ = builder.BuildAndStart();
  if (daemon->server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", absl::StrJoin(config.listen(), ", "),
        " (address in use or bad host)"));
  }
  grpc::Server* server = daemon->server_.get();
  DescriptorSocketServer* descriptor_server = daemon->descriptor_server_.get();
  // Note [Connections per client]: one quota across all Unix sockets.
  auto quota = std::make_shared<ConnectionQuota>(config.limits().max_connections_per_client());
  for (size_t i = 0; i < addresses.size(); ++i) {
    ListenAddress& address = addresses[i];
    if (address.kind == ListenAddress::Kind::kUnix) {
      // Note [Peer identity]: gRPC serves each connection the listener accepted.
      absl::StatusOr<std::unique_ptr<UnixListener>> grpc_listener = ListenOnUnixSocket(
          address.path, SOCK_STREAM, activated, config, [server, quota](int connection) {
            if (!AdmitConnection(*quota, connection)) return;
            fcntl(connection, F_SETFL, fcntl(connection, F_GETFL) | O_NONBLOCK);
            grpc::AddInsecureChannelFromFd(server, connection);
          });
      absl::StatusOr<std::unique_ptr<UnixListener>> descriptor_listener =
          grpc_listener.ok()
              ? ListenOnUnixSocket(
                    DescriptorSocketPathFor(address.path), SOCK_SEQPACKET, activated, config,
                    [descriptor_server](int connection) { descriptor_server->Serve(connection); })
              : grpc_listener.status();
      if (!descriptor_listener.ok()) {
        daemon->unix_listeners_.clear();
        daemon->server_->Shutdown();
        return descriptor_listener.status();
      }
      daemon->unix_listeners_.push_back(*std::move(grpc_listener));
      daemon->unix_listeners_.push_back(*std::move(descriptor_listener));
    }
    if (address.kind == ListenAddress::Kind::kTcp && config.tls().cert_file().empty() &&
        !IsLoopbackHost(address.host_port.host)) {
      spdlog::warn("{} is a plaintext listener beyond this machine (allow_insecure_remote): "
                   "anyone who reaches it can run code on the devices",
                   address.GrpcUri());
    }
    if (address.kind == ListenAddress::Kind::kTcp) {
      if (*tcp_ports[i] == 0) {
        daemon->unix_listeners_.clear();
        daemon->server_->Shutdown();
        return absl::UnavailableError(
            absl::StrCat("cannot listen on ", address.GrpcUri()));
      }
      address.host_port.port = *tcp_ports[i];
    }
    daemon->bound_grpc_addresses_.push_back(
        address.kind == ListenAddress::Kind::kUnix ? address.GrpcUri()
                                                   : absl::StrCat("tcp:", address.GrpcUri()));
  }
  daemon->server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);

  ASSIGN_OR_RETURN(HostPort http_address, ParseHostPort(config.http_listen()));
  Metrics* metrics = daemon->metrics_.get();
  ServerCore* core = daemon->core_.get();
  CompileCache* compiler = daemon->compiler_.get();
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> http = HttpEndpoint::Start(
      http_address, {.not_ready_reason = [core] { return core->NotReadyReason(); },
                     .render_metrics = [metrics, compiler, core] {
                       metrics->SetCompileCacheResults(compiler->memory_hits(),
                                                       compiler->disk_hits(),
                                                       compiler->misses());
                       const SharedMemoryTable::Usage shared = core->shared_memory().usage();
                       metrics->SetSharedMemory(shared.regions, shared.mapped_bytes);
                       metrics->SetSubmitBytes(core->submit_budget().held());
                       metrics->SetInlineBytes(core->inline_budget().HeldByAll());
                       metrics->SetOpenSessions(OpenSessions(*core));
                       return metrics->Render();
                     }});
  if (!http.ok()) {
    daemon->server_->Shutdown();
    return http.status();
  }
  daemon->http_ = *std::move(http);
  // Ready means every device finished initialising; one that failed is reported by
  // /readyz and refuses sessions, the others serve.
  for (int device = 0; device < daemon->device_count_; ++device) {
    daemon->core_->worker(device).AwaitInitialised();
  }
  Daemon* self = daemon.get();
  daemon->notifier_ = ServiceNotifier::FromEnvironment(
      {.status = [self] { return self->StatusLine(); },
       .stalled = [self](std::chrono::steady_clock::duration within) {
         return self->Stalled(within);
       }});
  if (daemon->notifier_ != nullptr) daemon->notifier_->Ready();
  return daemon;
}

std::string Daemon::StatusLine() const {
  int ready = 0;
  uint64_t queued = 0;
  for (int device = 0; device < device_count_; ++device) {
    ready += core_->worker(device).ready() ? 1 : 0;
    queued += core_->worker(device).queue_depth();
  }
  return absl::StrCat(ready, "/", device_count_, " devices ready, ",
                      core_->sessions().size(), " sessions, ", queued, " queued commands");
}

std::string Daemon::Stalled(std::chrono::steady_clock::duration within) {
  if (std::string wedged = core_->WedgedDevices(within); !wedged.empty()) return wedged;
  // The server's threads answer a health check through the in-process channel.
  if (health_stub_ == nullptr) {
    health_stub_ = grpc::health::v1::Health::NewStub(
        server_->InProcessChannel(grpc::ChannelArguments()));
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(within / 2));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status checked = health_stub_->Check(&context, request, &response);
  if (!checked.ok()) return absl::StrCat("the gRPC server (", checked.error_message(), ")");
  return "";
}

std::string Daemon::ReadyLine() const {
  return absl::StrCat("gpucmdd ready grpc=", absl::StrJoin(bound_grpc_addresses_, ","),
                      " http=", http_->host(), ":", http_->port(),
                      " devices=", device_count_);
}

bool Daemon::Shutdown() {
  if (shut_down_ || server_ == nullptr) return true;
  shut_down_ = true;
  if (notifier_ != nullptr) notifier_->Stopping();  // no more probes of what now stops
  server_->GetHealthCheckService()->SetServingStatus(false);
  // Lease streams carry no work: they end now, not at the drain's end.
  const absl::Status shutting_down = absl::UnavailableError("daemon shutting down");
  service_->EndLeases(shutting_down);
  const auto drain_end = std::chrono::system_clock::now() +
                         std::chrono::seconds(config_.drain_timeout_seconds());
  // Note [Draining]
  // ~~~~~~~~~~~~~~~~
  // gRPC ends calls that arrive during its own shutdown, before a handler took them,
  // CANCELLED (grpc/grpc#41785), which a client cannot tell from its own cancellation.
  // So the daemon first refuses: while the server still runs, new calls of sessions
  // (and new sessions) are answered UNAVAILABLE "daemon shutting down", until the
  // devices are quiet and no call started or ended for a moment (a client whose call was
  // answered just before sends its next one in that moment), or half the drain time
  // passed; clients see UNAVAILABLE and stop sending. Then gRPC's shutdown lets the calls
  // in flight finish until the drain's end, when queued work is answered UNAVAILABLE and
  // running kernels are stopped. soak_test's SigtermUnderMixedLoadKeepsAcknowledgedWrites
  // checks that every call ends OK or UNAVAILABLE.
  core_->sessions().RefuseNewWork(shutting_down);
  const auto refusing_until =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(500 * config_.drain_timeout_seconds());
  uint64_t starts_and_ends = metrics_->RpcStartsAndEnds();
  auto calm_since = std::chrono::system_clock::now();
  for (auto now = calm_since; now < refusing_until; now = std::chrono::system_clock::now()) {
    const uint64_t latest = metrics_->RpcStartsAndEnds();
    if (!core_->Quiet() || latest != starts_and_ends) {
      starts_and_ends = latest;
      calm_since = now;
    } else if (now - calm_since >= kRefusalLinger) {
      break;
    }
    std::this_thread::sleep_for(kDrainPoll);
  }
  // gRPC refuses new calls at once and lets those in flight run until its deadline,
  // then cancels the rest. At the drain's end the devices answer what is still queued
  // UNAVAILABLE, so that those calls end with that, not CANCELLED, a moment later.
  for (const std::unique_ptr<UnixListener>& listener : unix_listeners_) listener->Stop();
  std::future<void> drained = std::async(std::launch::async, [this, drain_end] {
    server_->Shutdown(drain_end + std::chrono::milliseconds(500));
  });
  // gRPC's shutdown also waits for each client to close its connection, which one that
  // is not reading it (idle between calls, or stopped) does only at the deadline: once
  // no call is in flight, the connections are closed from this side.
  while (drained.wait_for(kDrainPoll) == std::future_status::timeout) {
    if (std::chrono::system_clock::now() >= drain_end) {
      core_->FailQueuedWork(shutting_down);
      break;
    }
    if (metrics_->RpcsInFlight() == 0) {
      grpc_server_cancel_all_calls(server_->c_server());
      break;
    }
  }
  drained.wait();
  server_->Wait();
  unix_listeners_.clear();
  descriptor_server_.reset();
  http_.reset();
  // A GPU kernel cannot be stopped from the host (the CPU driver kills its executors),
  // and a device thread waiting for one would hold the exit past the drain: a second
  // after it, the caller exits without it, and the driver ends the kernel with the
  // process's contexts.
  return core_->StopBy(std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           drain_end - std::chrono::system_clock::now()) +
                       kDevicesStopGrace);
}

Daemon::~Daemon() { Shutdown(); }

}  // namespace gpucmd
