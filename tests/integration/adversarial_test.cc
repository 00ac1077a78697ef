// Attacks a hostile client would try, each through the real daemon (CPU driver), beside
// a victim session whose bytes must come through untouched: kernels that run a shell,
// open, write or scan files, or kill the daemon; compiles that read files through
// #include or .incbin (in any spelling), or burn the compiler's time and memory; a
// kernel that runs long while another session works. Each must fail (or be contained)
// while the daemon keeps serving. (Note [Sandbox] in
// base/sandbox.h.)

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/identity.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/kernels/kernel_sources.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_census.h"
#include "tests/testing/random_bytes.h"
#include "tests/testing/raw_call.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::CallWithRawBody;
using ::gpucmd::testing::DaemonProcess;
using ::gpucmd::testing::NoProcessMatches;
using ::gpucmd::testing::RandomBytes;
using ::gpucmd::testing::ShortTempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// Long enough for an ordinary compile on a loaded machine (the limit is wall-clock time
// as well as CPU time), short enough for the time bomb below to reach it quickly.
constexpr int kCompileTimeoutSeconds = 8;
constexpr uint64_t kCompileMemoryBytes = 256 << 20;
constexpr char kVictimBytes[] = "victim-bytes-16!";
constexpr int kQueuedCommands = 8;
constexpr int kSessionsPerClient = 16;
constexpr uint64_t kInlineBytesPerSession = 8 << 20;
constexpr uint64_t kInlineBytes = 16 << 20;  // all sessions together
constexpr uint64_t kWaitingSourceBytes = 2 << 20;
constexpr uint64_t kSubmitBytes = 64 << 20;
constexpr int kCallsPerConnection = 64;
constexpr int kConnectionsPerClient = 4;

class AdversarialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string directory = ShortTempDir();
    std::string config = directory + "/gpucmdd.textproto";
    std::ofstream(config) << "cpu { memory_bytes_per_device: " << (64 << 20)
                          << " kernel_timeout_seconds: 10 executor_workers: 2"
                          << " executor_memory_bytes: " << (256 << 20) << " }\n"
                          << "compile { cache_dir: \"" << directory << "/cache\""
                          << " timeout_seconds: " << kCompileTimeoutSeconds
                          << " max_memory_bytes: " << kCompileMemoryBytes
                          << " max_waiting_source_bytes: " << kWaitingSourceBytes << " }\n"
                          << "limits { session_queued_commands: " << kQueuedCommands
                          << " max_sessions_per_client: " << kSessionsPerClient
                          << " max_inline_bytes_per_session: " << kInlineBytesPerSession
                          << " max_inline_bytes: " << kInlineBytes
                          << " max_submit_bytes: " << kSubmitBytes
                          << " max_calls_per_connection: " << kCallsPerConnection
                          << " max_connections_per_client: " << kConnectionsPerClient << " }\n";
    absl::StatusOr<DaemonProcess> daemon =
        DaemonProcess::Start({"--listen=unix:" + directory + "/gpucmdd.sock",
                              "--http_listen=127.0.0.1:0", "--config=" + config});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    for (auto [session, name] : {std::pair{&attacker_, "attacker"}, std::pair{&victim_, "victim"}}) {
      absl::StatusOr<Session> opened = client_->OpenSession(0, name);
      ASSERT_TRUE(opened.ok()) << opened.status();
      session->emplace(*std::move(opened));
    }
    absl::StatusOr<Buffer> kept = victim_->Allocate(16);
    ASSERT_TRUE(kept.ok()) << kept.status();
    kept_.emplace(*std::move(kept));
    ASSERT_TRUE(victim_->Write(*kept_, 0, kVictimBytes).ok());
  }

  // The daemon serves, and the victim's bytes are what it wrote.
  void TearDown() override {
    if (!kept_) return;
    EXPECT_TRUE(client_->ListDevices().ok()) << "the daemon stopped serving";
    absl::StatusOr<std::string> back = victim_->Read(*kept_, 0, 16);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, kVictimBytes);
  }

  // Compiles `source` (entry point `attack`, one `long long* out` parameter), runs one
  // thread of it and returns out[0]; nullopt when the system-call filter killed the
  // executor for the attempt (the launch's output then says so; Landlock alone, as in
  // sanitizer builds, makes the call fail instead).
  std::optional<long long> RunAttack(const std::string& source) {
    absl::StatusOr<v1::CompileResponse> compiled = attacker_->Compile(source, "attack");
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (!compiled.ok()) return 0;
    absl::StatusOr<Buffer> out = attacker_->Allocate(sizeof(long long));
    EXPECT_TRUE(out.ok());
    EXPECT_TRUE(attacker_->Write(*out, 0, std::string(sizeof(long long), '\0')).ok());
    absl::Status launched = attacker_->Launch(compiled->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                                              {BufferArgument(*out, v1::ACCESS_WRITE)});
    EXPECT_TRUE(launched.ok()) << launched;
    absl::StatusOr<std::string> bytes = attacker_->Read(*out, 0, sizeof(long long));
    if (!bytes.ok()) {
      EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition) << bytes.status();
      EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("Bad system call"));
      return std::nullopt;
    }
    long long value = 0;
    std::memcpy(&value, bytes->data(), sizeof(value));
    return value;
  }

  // A streamed Write left open: its header and the first quarter of its bytes.
  struct OpenWrite {
    grpc::ClientContext context;
    v1::WriteResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::WriteRequest>> stream;
  };
  // Opens `write` into `buffer` of `session`, declaring `size` bytes, ended by `deadline`.
  void StartWrite(OpenWrite& write, const Session& session, const Buffer& buffer, uint64_t size,
                  std::chrono::seconds deadline) {
    write.context.set_deadline(std::chrono::system_clock::now() + deadline);
    write.stream = client_->stub().Write(&write.context, &write.response);
    v1::WriteRequest first;
    first.mutable_header()->set_session(session.token());
    first.mutable_header()->set_buffer(buffer.id());
    first.mutable_header()->set_inline_size_bytes(size);
    first.set_data(std::string(size / 4, 'x'));
    write.stream->Write(first);
  }

  // The value of the unlabelled metric `name` on /metrics; all ones when it is missing.
  uint64_t MetricValue(const std::string& name) {
    absl::StatusOr<double> value =
        testing::MetricValue(daemon_->http_host(), daemon_->http_port(), name);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? static_cast<uint64_t>(*value) : ~uint64_t{0};
  }

  // Polls `value` until it is `wanted` or `give_up` passed; returns its last value.
  static uint64_t AwaitValue(const std::function<uint64_t()>& value, uint64_t wanted,
                             std::chrono::steady_clock::time_point give_up) {
    uint64_t last = value();
    while (last != wanted && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      last = value();
    }
    return last;
  }

  // A buffer of the attacker's holding `bytes`.
  Buffer AttackerBufferHolding(const std::string& bytes) {
    absl::StatusOr<Buffer> buffer = attacker_->Allocate(bytes.size());
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(attacker_->Write(*buffer, 0, bytes).ok());
    return std::move(buffer).value();  // stops the test with its status if it failed
  }

  // Opens `count` sessions, each holding a buffer it wrote and synchronized: each has
  // taken its stream.
  std::vector<std::pair<Session, Buffer>> SessionsOnStreams(int count, const std::string& name) {
    std::vector<std::pair<Session, Buffer>> sessions;
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<Session> session = client_->OpenSession(0, absl::StrCat(name, i));
      EXPECT_TRUE(session.ok()) << session.status();
      absl::StatusOr<Buffer> buffer = session->Allocate(4096);
      EXPECT_TRUE(buffer.ok() && session->Write(*buffer, 0, "s").ok());
      EXPECT_TRUE(session->Synchronize().ok());
      sessions.emplace_back(*std::move(session), *std::move(buffer));
    }
    return sessions;
  }

  // A new buffer of `session`'s, written, read back and synchronized: a few commands of
  // the kind another session's long kernel must not hold up.
  void AllocateWriteReadAndSynchronize(Session& session) {
    absl::StatusOr<Buffer> buffer = session.Allocate(4096);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    const std::string data(4096, 'n');
    EXPECT_TRUE(session.Write(*buffer, 0, data).ok());
    EXPECT_EQ(session.Read(*buffer, 0, 4096).value_or(""), data);
    EXPECT_TRUE(session.Synchronize().ok());
  }

  // Queues a kernel of 3 s or more on the attacker's stream: long enough that what a
  // test queues behind it is queued while it still runs, on a loaded machine too.
  void LaunchAttackersLongKernel(int64_t ticks = 3'000'000'000) {
    absl::StatusOr<v1::CompileResponse> spin = attacker_->Compile(kernels::kSpin, "spin");
    EXPECT_TRUE(spin.ok()) << spin.status();
    EXPECT_TRUE(attacker_
                    ->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                             {Int64Argument(ticks)})
                    .ok());
  }

  // Launches and device copies return once queued: an attacker that floods its stream
  // behind a long kernel with `queue_one` is held to its queued-command limit instead of
  // piling up work without end, and may queue again once the stream ran.
  void ExpectAFloodBehindALongKernelMeetsBackpressure(
      absl::FunctionRef<absl::Status()> queue_one);

  // LaunchAttackersLongKernel, then waits for it on a thread, which sets `ended` once the
  // attacker's Synchronize returned.
  std::thread RunAttackersLongKernel(std::atomic<bool>& ended,
                                     int64_t ticks = 3'000'000'000) {
    LaunchAttackersLongKernel(ticks);
    return std::thread([this, &ended] {
      EXPECT_TRUE(attacker_->Synchronize().ok());
      ended = true;
    });
  }

  // Sends `batch` as one Submit call on a thread, which gathers every reply into
  // `replies` (both must outlive the thread).
  std::thread SubmitOnAThread(const v1::SubmitRequest& batch, v1::SubmitResponse& replies) {
    return std::thread([this, &batch, &replies] {
      grpc::ClientContext context;
      auto stream = client_->stub().Submit(&context);
      EXPECT_TRUE(stream->Write(batch));
      stream->WritesDone();
      v1::SubmitResponse response;
      while (stream->Read(&response)) replies.MergeFrom(response);
      EXPECT_TRUE(stream->Finish().ok());
    });
  }

  absl::Status CompileOnly(const std::string& source,
                           const std::vector<std::string>& options = {}) {
    return attacker_->Compile(source, "attack", options).status();
  }

  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::optional<Session> attacker_;
  std::optional<Session> victim_;
  std::optional<Buffer> kept_;
};

// A marker for files and processes of this test run.
std::string Marker(const std::string& what) {
  return "/tmp/gpucmd-adversarial-" + what + "-" + std::to_string(getpid());
}

TEST_F(AdversarialTest, AKernelCannotRunAShell) {
  std::string pwned = Marker("system");
  std::optional<long long> status = RunAttack(R"(
      extern "C" __device__ int system(const char*);
      extern "C" __global__ void attack(long long* out) {
        out[0] = system("touch )" + pwned + R"(");
      })");
  EXPECT_NE(status, 0) << "the shell ran";
  EXPECT_FALSE(std::filesystem::exists(pwned));
}

TEST_F(AdversarialTest, AKernelCannotOpenFilesOrTheDaemonsMemory) {
  for (const std::string& path :
       {std::string("/etc/passwd"), "/proc/" + std::to_string(daemon_->pid()) + "/mem",
        std::string("/proc/self/environ")}) {
    std::optional<long long> fd = RunAttack(R"(
        extern "C" __device__ int open(const char*, int, ...);
        extern "C" __global__ void attack(long long* out) {
          out[0] = open(")" + path + R"(", 0);
        })");
    EXPECT_EQ(fd, -1) << path << " was opened";
  }
}

TEST_F(AdversarialTest, AKernelCannotWriteFiles) {
  std::string written = Marker("write");
  std::optional<long long> fd = RunAttack(R"(
      extern "C" __device__ int open(const char*, int, ...);
      extern "C" __global__ void attack(long long* out) {
        out[0] = open(")" + written + R"(", 0101, 0644);  // O_WRONLY | O_CREAT
      })");
  if (fd.has_value()) {
    EXPECT_EQ(*fd, -1);
  }
  EXPECT_FALSE(std::filesystem::exists(written));
}

TEST_F(AdversarialTest, AKernelRunsAsAnUnprivilegedUser) {
  std::optional<long long> uid = RunAttack(R"(
      extern "C" __device__ unsigned getuid();
      extern "C" __global__ void attack(long long* out) { out[0] = getuid(); })");
  ASSERT_TRUE(uid.has_value());
  if (geteuid() != 0) {
    EXPECT_EQ(*uid, geteuid()) << "a daemon that is not root keeps its user";
    return;
  }
  absl::StatusOr<UnixIdentity> nobody = LookUpUser("nobody");
  ASSERT_TRUE(nobody.ok()) << nobody.status();
  EXPECT_EQ(*uid, nobody->uid) << "the daemon runs as root: kernels run as cpu.executor_user";
  // And nothing lets it become root again.
  EXPECT_NE(RunAttack(R"(
      extern "C" __device__ int setuid(unsigned);
      extern "C" __global__ void attack(long long* out) { out[0] = setuid(0); })"),
            std::optional<long long>(0));
}

TEST_F(AdversarialTest, AKernelCannotKillTheDaemon) {
  std::optional<long long> killed = RunAttack(R"(
      extern "C" __device__ int kill(int, int);
      extern "C" __device__ int getppid();
      extern "C" __global__ void attack(long long* out) {
        out[0] = kill(getppid(), 9);
      })");
  if (killed.has_value()) {
    EXPECT_EQ(*killed, -1);
  }
  EXPECT_EQ(kill(daemon_->pid(), 0), 0) << "the daemon is gone";
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// The system-call filter (not installed in sanitizer builds).
TEST_F(AdversarialTest, AKernelCannotStartProcessesOrOpenSockets) {
  EXPECT_EQ(RunAttack(R"(
      extern "C" __device__ int fork();
      extern "C" __global__ void attack(long long* out) { out[0] = fork(); })"),
            std::nullopt)
      << "fork was not refused";
  EXPECT_EQ(RunAttack(R"(
      extern "C" __device__ int socket(int, int, int);
      extern "C" __global__ void attack(long long* out) { out[0] = socket(2, 1, 0); })"),
            std::nullopt)
      << "socket was not refused";
  // The executor restarted: kernels run again.
  EXPECT_EQ(RunAttack(R"(
      extern "C" __global__ void attack(long long* out) { out[0] = 42; })"),
            42);
}

// A thread a kernel started would outlive its launch and run during later launches,
// when other sessions' buffers are open: starting one kills the executor.
TEST_F(AdversarialTest, AKernelCannotLeaveAThreadBehind) {
  EXPECT_EQ(RunAttack(R"(
      extern "C" __device__ int pthread_create(unsigned long*, const void*, void* (*)(void*),
                                               void*);
      static __device__ void* spy(void*) {
        for (volatile int forever = 1; forever;) {}
        return nullptr;
      }
      extern "C" __global__ void attack(long long* out) {
        unsigned long thread;
        out[0] = pthread_create(&thread, nullptr, spy, nullptr) == 0 ? 1 : 2;
      })"),
            std::nullopt)
      << "the thread was started (1) or refused without ending the executor (2)";
  EXPECT_EQ(RunAttack(R"(
      extern "C" __global__ void attack(long long* out) { out[0] = 42; })"),
            42);
}

// The executor's address-space limit (not set in sanitizer builds, whose runtimes
// reserve terabytes).
TEST_F(AdversarialTest, AKernelCannotAllocateWithoutLimit) {
  EXPECT_EQ(RunAttack(R"(
      extern "C" __device__ void* malloc(unsigned long);
      extern "C" __global__ void attack(long long* out) {
        out[0] = malloc(8ull << 30) != 0;
      })"),
            0)
      << "8 GiB allocated beyond the executor's 256 MiB";
}
#endif

TEST_F(AdversarialTest, AKernelCannotReachAnotherSessionsBuffer) {
  absl::StatusOr<Buffer> mine = attacker_->Allocate(16);
  ASSERT_TRUE(mine.ok()) << mine.status();
  // Allocated after the attacker's: next to it in the device's memory.
  absl::StatusOr<Buffer> neighbour = victim_->Allocate(16);
  ASSERT_TRUE(neighbour.ok()) << neighbour.status();
  ASSERT_TRUE(victim_->Write(*neighbour, 0, kVictimBytes).ok());
  absl::StatusOr<v1::CompileResponse> scan = attacker_->Compile(R"(
      // Walks 1 MiB up from its own buffer, overwriting every 16-byte word it finds
      // equal to the victim's bytes.
      extern "C" __global__ void attack(long long* mine) {
        const char* victim = "victim-bytes-16!";
        for (long long offset = 16; offset < (1 << 20); offset += 16) {
          char* word = (char*)mine + offset;
          bool same = true;
          for (int i = 0; i < 16; ++i) same = same && word[i] == victim[i];
          if (same) {
            for (int i = 0; i < 16; ++i) word[i] = 'X';
            mine[0] = offset;
          }
        }
      })",
                                                              "attack");
  ASSERT_TRUE(scan.ok()) << scan.status();
  ASSERT_TRUE(attacker_->Launch(scan->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                                {BufferArgument(*mine, v1::ACCESS_READ_WRITE)})
                  .ok());
  absl::StatusOr<std::string> outcome = attacker_->Read(*mine, 0, 16);
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition)
      << "the scan ran to its end";
  EXPECT_THAT(std::string(outcome.status().message()), HasSubstr("Segmentation fault"));
  absl::StatusOr<std::string> kept = victim_->Read(*neighbour, 0, 16);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, kVictimBytes);
  // The attacker's own buffer stays usable.
  EXPECT_TRUE(attacker_->Write(*mine, 0, std::string(16, 'a')).ok());
  EXPECT_EQ(attacker_->Read(*mine, 0, 16).value_or(""), std::string(16, 'a'));
}

TEST_F(AdversarialTest, FreedBytesDoNotReachTheNextOwner) {
  absl::StatusOr<Buffer> secret = victim_->Allocate(4096);
  ASSERT_TRUE(secret.ok()) << secret.status();
  ASSERT_TRUE(victim_->Write(*secret, 0, std::string(4096, 's')).ok());
  ASSERT_TRUE(victim_->Synchronize().ok());
  ASSERT_TRUE(secret->Free().ok());
  for (int i = 0; i < 4; ++i) {  // whichever slot the pool hands out next
    absl::StatusOr<Buffer> mine = attacker_->Allocate(4096);
    ASSERT_TRUE(mine.ok()) << mine.status();
    EXPECT_EQ(attacker_->Read(*mine, 0, 4096).value_or("unreadable"), std::string(4096, '\0'));
  }
}

// Head-of-line blocking: while the attacker's kernel spins (and the attacker waits for
// it), the victim's allocations, copies and kernels go on beside it, as copy engines
// and other streams run beside a kernel on a GPU.
TEST_F(AdversarialTest, ALongKernelDoesNotHoldUpAnotherSessionsWork) {
  constexpr long long kSpinNanoseconds = 6'000'000'000;
  absl::StatusOr<v1::CompileResponse> spin = attacker_->Compile(R"(
      extern "C" __global__ void attack(long long* out, long long ticks) {
        long long start = clock64();
        while (clock64() - start < ticks) {}
        out[0] = 1;
      })",
                                                              "attack");
  ASSERT_TRUE(spin.ok()) << spin.status();
  absl::StatusOr<v1::CompileResponse> increment = victim_->Compile(R"(
      extern "C" __global__ void increment(char* bytes) { bytes[threadIdx.x] += 1; })",
                                                                   "increment");
  ASSERT_TRUE(increment.ok()) << increment.status();
  absl::StatusOr<Buffer> out = attacker_->Allocate(sizeof(long long));
  ASSERT_TRUE(out.ok()) << out.status();
  const absl::Time launched = absl::Now();  // before the kernel can start
  ASSERT_TRUE(attacker_->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                                {BufferArgument(*out, v1::ACCESS_WRITE),
                                 Int64Argument(kSpinNanoseconds)})
                  .ok());
  std::atomic<bool> attacker_synchronized{false};
  std::thread attacker_waits([&] {
    EXPECT_TRUE(attacker_->Synchronize().ok());
    attacker_synchronized = true;
  });
  absl::SleepFor(absl::Milliseconds(300));  // the kernel runs, the attacker waits

  const absl::Time start = absl::Now();
  absl::StatusOr<Buffer> a = victim_->Allocate(4096);
  absl::StatusOr<Buffer> b = victim_->Allocate(4096);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string data(4096, 'v');
  EXPECT_TRUE(victim_->Write(*a, 0, data).ok());
  EXPECT_TRUE(victim_->Copy(*a, 0, *b, 0, 4096).ok());
  EXPECT_EQ(victim_->Read(*b, 0, 4096).value_or(""), data);
  EXPECT_TRUE(victim_->Launch(increment->kernel_id(), {MakeDim3(1), MakeDim3(64)},
                              {BufferArgument(*b, v1::ACCESS_READ_WRITE)})
                  .ok());
  EXPECT_EQ(victim_->Read(*b, 0, 1).value_or(""), "w") << "the victim's kernel ran";
  EXPECT_TRUE(victim_->Synchronize().ok());
  EXPECT_TRUE(a->Free().ok());
  EXPECT_TRUE(b->Free().ok());
  const absl::Duration victim_took = absl::Now() - start;

  EXPECT_FALSE(attacker_synchronized) << "the attacker's kernel ended before the victim did";
  EXPECT_LT(victim_took, absl::Nanoseconds(kSpinNanoseconds) / 3)
      << "the victim waited behind the attacker's kernel";
  attacker_waits.join();
  EXPECT_GE(absl::Now() - launched, absl::Nanoseconds(kSpinNanoseconds));
  EXPECT_EQ(attacker_->Read(*out, 0, 1).value_or(""), std::string(1, '\1'));
}

// Sessions share the device's streams (four here) once there are more of them. A new
// session gets an idle stream before one busy with another session's long kernel, even
// where round robin would hand it the busy one. The streams are taken in order: the
// victim's (SetUp), the attacker's, then three fillers' (the third shares the first),
// so the next in turn is the attacker's.
TEST_F(AdversarialTest, ANewSessionGetsAnIdleStreamBeforeOneBusyWithALongKernel) {
  AttackerBufferHolding("a");  // the attacker's stream
  std::vector<std::pair<Session, Buffer>> fillers = SessionsOnStreams(3, "filler");
  std::atomic<bool> attacker_synchronized{false};
  std::thread attacker_waits = RunAttackersLongKernel(attacker_synchronized);

  absl::StatusOr<Session> newcomer = client_->OpenSession(0, "newcomer");
  ASSERT_TRUE(newcomer.ok()) << newcomer.status();
  AllocateWriteReadAndSynchronize(*newcomer);
  EXPECT_FALSE(attacker_synchronized) << "the newcomer waited for the attacker's kernel";
  attacker_waits.join();
}

// A session's own work on another of its streams is answered while its long kernel runs
// (Note [Logical streams] in server/command/command.h): a read's and a synchronization's
// answer wait for their stream alone (Note [Completions called back] in
// server/core/device_worker.h).
TEST_F(AdversarialTest, ASessionsOtherStreamIsAnsweredWhileItsLongKernelRuns) {
  Buffer buffer = AttackerBufferHolding(std::string(4096, 'a'));
  ASSERT_TRUE(attacker_->Synchronize().ok());
  LaunchAttackersLongKernel();
  constexpr uint64_t kOtherStream = 1;
  const std::string data(4096, 'o');
  ASSERT_TRUE(attacker_->Write(buffer, 0, data, kOtherStream).ok());
  EXPECT_EQ(attacker_->Read(buffer, 0, data.size(), kOtherStream).value_or(""), data);
  EXPECT_TRUE(attacker_->Synchronize(kOtherStream).ok());
  absl::StatusOr<v1::GetStatsResponse> stats = attacker_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->devices(0).stream_queued_commands(), 1u)
      << "the kernel had ended: the test proves nothing";
  EXPECT_TRUE(attacker_->Synchronize().ok());
}

// More than twice as many sessions as device streams: some share the attacker's stream.
// Once the attacker's long kernel runs, their next work goes to an idle stream instead of
// queuing behind the kernel, whichever sessions they are.
TEST_F(AdversarialTest, ASessionSharingAStreamMovesOffItWhileAnothersLongKernelRuns) {
  AttackerBufferHolding("a");  // the attacker's stream
  // With the victim and the attacker, nine sessions on four streams.
  std::vector<std::pair<Session, Buffer>> others = SessionsOnStreams(7, "other");
  std::atomic<bool> attacker_synchronized{false};
  std::thread attacker_waits = RunAttackersLongKernel(attacker_synchronized);
  const std::string data(4096, 'n');
  for (size_t i = 0; i < others.size(); ++i) {
    auto& [other, buffer] = others[i];
    EXPECT_TRUE(other.Write(buffer, 0, data).ok()) << i;
    EXPECT_EQ(other.Read(buffer, 0, 4096).value_or(""), data) << i;
    EXPECT_TRUE(other.Synchronize().ok()) << i;
  }
  EXPECT_FALSE(attacker_synchronized) << "a session waited for the attacker's kernel";
  attacker_waits.join();
}

// The attacker fragments its pages while its long kernel runs, so that the daemon wants
// to relocate (and asks it to, with Defragment): relocation waits for no kernel, and the
// victim's commands go on meanwhile.
TEST_F(AdversarialTest, RelocationWantedDuringALongKernelHoldsUpNoOne) {
  std::vector<Buffer> buffers;
  // Three 2 MiB pages of 64 KiB slices, then one slice in sixteen kept: fragmented.
  auto contents = [](int i) { return std::string(64 << 10, static_cast<char>('a' + i % 26)); };
  for (int i = 0; i < 96; ++i) buffers.push_back(AttackerBufferHolding(contents(i)));
  std::atomic<bool> attacker_synchronized{false};
  std::thread attacker_waits = RunAttackersLongKernel(attacker_synchronized);
  for (int i = 0; i < 96; ++i) {
    if (i % 16 == 0) continue;
    ASSERT_TRUE(buffers[i].Free().ok()) << i;
  }
  grpc::ClientContext context;
  v1::DefragmentRequest request;
  v1::DefragmentResponse response;
  ASSERT_TRUE(client_->stub().Defragment(&context, request, &response).ok());
  EXPECT_TRUE(response.deferred()) << "nothing moves while a kernel runs";
  AllocateWriteReadAndSynchronize(*victim_);
  EXPECT_FALSE(attacker_synchronized) << "the victim waited for the attacker's kernel";
  attacker_waits.join();
  // Relocated once the kernel ended (by the daemon, or here); the bytes moved with it.
  grpc::ClientContext again_context;
  ASSERT_TRUE(client_->stub().Defragment(&again_context, request, &response).ok());
  EXPECT_FALSE(response.deferred());
  uint64_t relocations = 0;  // as published once the device thread is idle again
  for (int tries = 0; tries < 1000 && relocations == 0; ++tries) {
    absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats(attacker_->token());
    ASSERT_TRUE(stats.ok()) << stats.status();
    relocations = stats->devices(0).relocations();
    if (relocations == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(relocations, 0u) << "the fragmented pages were evacuated once the kernel ended";
  for (int i = 0; i < 96; i += 16) {
    EXPECT_EQ(attacker_->Read(buffers[i], 0, 64 << 10).value_or(""), contents(i)) << i;
  }
}

// The attacker fills most of the device with a buffer its long kernel reads, and frees it
// while the kernel runs: that memory comes back only when the kernel ends. An Allocate
// that needs it waits for it off the device thread and then succeeds, unary or in a
// batch; one that could not fit even then is refused at once; and a bystander's commands
// go on meanwhile.
TEST_F(AdversarialTest, AnAllocateWaitingForFreedMemoryHoldsUpNoOne) {
  // Of the device's 64 MiB: the victim holds 8, the attacker's kernel 40; two requests of
  // 20 fit only once the kernel's 40 are back, and 60 never fit while the victim holds
  // its 8.
  constexpr uint64_t kBallast = 8 << 20;
  constexpr uint64_t kHeld = 40 << 20;
  constexpr uint64_t kWanted = 20 << 20;
  constexpr uint64_t kNeverFits = 60 << 20;
  absl::StatusOr<Buffer> ballast = victim_->Allocate(kBallast);
  ASSERT_TRUE(ballast.ok()) << ballast.status();
  absl::StatusOr<v1::CompileResponse> hold = attacker_->Compile(R"(
      extern "C" __global__ void hold(const char* bytes, long long ticks) {
        long long start = clock64();
        while (clock64() - start < ticks) {}
      })",
                                                             "hold");
  ASSERT_TRUE(hold.ok()) << hold.status();
  absl::StatusOr<Buffer> held = attacker_->Allocate(kHeld);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(attacker_
                  ->Launch(hold->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                           {BufferArgument(*held, v1::ACCESS_READ), Int64Argument(3'000'000'000)})
                  .ok());
  std::atomic<bool> attacker_synchronized{false};
  std::thread attacker_waits([&] {
    EXPECT_TRUE(attacker_->Synchronize().ok());
    attacker_synchronized = true;
  });
  ASSERT_TRUE(held->Free().ok());

  absl::StatusOr<Buffer> wanted = absl::UnknownError("not answered");
  std::thread victim_allocates([&] { wanted = victim_->Allocate(kWanted); });
  absl::StatusOr<Session> batcher = client_->OpenSession(0, "batcher");
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  v1::SubmitRequest batch;
  v1::Command* allocate = batch.add_commands();
  allocate->set_sequence(1);
  allocate->mutable_allocate()->set_session(batcher->token());
  allocate->mutable_allocate()->set_size_bytes(kWanted);
  v1::Command* write = batch.add_commands();
  write->set_sequence(2);
  write->mutable_write()->mutable_header()->set_session(batcher->token());
  write->mutable_write()->mutable_header()->set_buffer_ref(1);
  write->mutable_write()->mutable_header()->set_inline_size_bytes(7);
  write->mutable_write()->set_data("batched");
  v1::Command* read = batch.add_commands();
  read->set_sequence(3);
  read->mutable_read()->set_session(batcher->token());
  read->mutable_read()->set_buffer_ref(1);
  read->mutable_read()->set_size_bytes(7);
  v1::SubmitResponse replies;
  std::thread batch_runs = SubmitOnAThread(batch, replies);
  absl::SleepFor(absl::Milliseconds(300));  // both wait for the kernel

  absl::StatusOr<Session> bystander = client_->OpenSession(0, "bystander");
  ASSERT_TRUE(bystander.ok()) << bystander.status();
  absl::Status never_fits = bystander->Allocate(kNeverFits).status();
  EXPECT_EQ(never_fits.code(), absl::StatusCode::kResourceExhausted) << never_fits;
  EXPECT_THAT(std::string(never_fits.message()), HasSubstr("out of device memory"));
  AllocateWriteReadAndSynchronize(*bystander);
  EXPECT_FALSE(attacker_synchronized) << "the bystander waited for the attacker's kernel";

  victim_allocates.join();
  batch_runs.join();
  attacker_waits.join();
  EXPECT_TRUE(wanted.ok()) << wanted.status();
  ASSERT_EQ(replies.replies_size(), 3);
  for (const v1::CommandReply& reply : replies.replies()) {
    EXPECT_EQ(reply.status().code(), 0) << reply.sequence() << ": " << reply.status().message();
  }
  EXPECT_EQ(replies.replies(2).read().data(), "batched");
}

// The attacker queues thousands of small writes behind its long kernel in one batch:
// their staged bytes fill its stream's drop queue (bounded at 4096 entries). The batch
// waits for room off the device thread, a bystander's commands go on meanwhile, and
// every write lands.
TEST_F(AdversarialTest, WritesPilingUpBehindALongKernelHoldUpNoOne) {
  constexpr int kWrites = 4500;
  Buffer target = AttackerBufferHolding(std::string(kWrites, '-'));
  std::string expected;
  v1::SubmitRequest batch;
  for (int i = 0; i < kWrites; ++i) {
    expected.push_back(static_cast<char>('a' + i % 26));
    v1::Command* command = batch.add_commands();
    command->set_sequence(i);
    v1::WriteHeader* header = command->mutable_write()->mutable_header();
    header->set_session(attacker_->token());
    header->set_buffer(target.id());
    header->set_offset_bytes(i);
    header->set_inline_size_bytes(1);
    command->mutable_write()->set_data(expected.substr(i, 1));
  }
  std::atomic<bool> attacker_synchronized{false};
  std::thread attacker_waits = RunAttackersLongKernel(attacker_synchronized);
  v1::SubmitResponse replies;
  std::thread batch_runs = SubmitOnAThread(batch, replies);
  absl::SleepFor(absl::Milliseconds(500));  // the batch fills the queue and waits

  absl::StatusOr<Session> bystander = client_->OpenSession(0, "bystander");
  ASSERT_TRUE(bystander.ok()) << bystander.status();
  AllocateWriteReadAndSynchronize(*bystander);
  EXPECT_FALSE(attacker_synchronized) << "the bystander waited for the attacker's kernel";

  batch_runs.join();
  attacker_waits.join();
  ASSERT_EQ(replies.replies_size(), kWrites);
  int failed = 0;
  for (const v1::CommandReply& reply : replies.replies()) failed += reply.status().code() != 0;
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(attacker_->Read(target, 0, kWrites).value_or(""), expected);
}

void AdversarialTest::ExpectAFloodBehindALongKernelMeetsBackpressure(
    absl::FunctionRef<absl::Status()> queue_one) {
  LaunchAttackersLongKernel();
  absl::Status refused;
  int accepted = 1;
  for (int i = 0; i < 4 * kQueuedCommands && refused.ok(); ++i) {
    refused = queue_one();
    if (refused.ok()) ++accepted;
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("limits.session_queued_commands"));
  EXPECT_LE(accepted, kQueuedCommands);
  absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats(attacker_->token());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->session().queued_commands(), static_cast<uint64_t>(accepted - 1))
      << "the work waiting behind the long kernel is reported";
  EXPECT_GE(stats->devices(0).stream_queued_commands(), static_cast<uint64_t>(accepted - 1));
  auto metrics = testing::HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(metrics->body, Not(HasSubstr("gpucmd_stream_queued_commands{device=\"0\"} 0\n")))
      << "operators see the work queued on streams";
  ASSERT_TRUE(attacker_->Synchronize().ok());
  EXPECT_TRUE(queue_one().ok()) << "work is accepted again once the queued work ran";
}

TEST_F(AdversarialTest, ALaunchFloodMeetsBackpressure) {
  absl::StatusOr<v1::CompileResponse> spin = attacker_->Compile(kernels::kSpin, "spin");
  ASSERT_TRUE(spin.ok()) << spin.status();
  ExpectAFloodBehindALongKernelMeetsBackpressure([&] {
    return attacker_->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)}, {Int64Argument(0)});
  });
}

// Once, device-to-device copies were counted against no limit: a flood of them behind a
// long kernel piled up on the stream without end.
TEST_F(AdversarialTest, ACopyFloodMeetsBackpressure) {
  absl::StatusOr<Buffer> source = attacker_->Allocate(4096);
  absl::StatusOr<Buffer> target = attacker_->Allocate(4096);
  ASSERT_TRUE(source.ok() && target.ok());
  ASSERT_TRUE(attacker_->Write(*source, 0, std::string(4096, 'c')).ok());
  ExpectAFloodBehindALongKernelMeetsBackpressure(
      [&] { return attacker_->Copy(*source, 0, *target, 0, 4096); });
}

// Fills are device work queued on the stream, held to the same limit.
TEST_F(AdversarialTest, AFillFloodMeetsBackpressure) {
  absl::StatusOr<Buffer> target = attacker_->Allocate(4096);
  ASSERT_TRUE(target.ok());
  ExpectAFloodBehindALongKernelMeetsBackpressure(
      [&] { return attacker_->Fill(*target, 0, 4096, 0xff); });
}

// A unary Read is answered once its copy ran, but its copy is queued on the stream like
// any other: reads started at once behind a long kernel are held to the same limit
// (whether the device thread's queue or the stream refuses them, naming it).
TEST_F(AdversarialTest, AReadFloodMeetsBackpressure) {
  constexpr int kReads = 4 * kQueuedCommands;
  absl::StatusOr<Buffer> buffer = attacker_->Allocate(64);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(attacker_->Write(*buffer, 0, std::string(64, 'r')).ok());
  LaunchAttackersLongKernel();
  std::vector<absl::StatusOr<std::string>> reads(kReads, absl::UnknownError("not read"));
  std::vector<std::thread> readers;
  for (int i = 0; i < kReads; ++i) {
    readers.emplace_back([&, i] { reads[i] = attacker_->Read(*buffer, 0, 64); });
  }
  for (std::thread& reader : readers) reader.join();
  int answered = 0;
  for (const absl::StatusOr<std::string>& read : reads) {
    if (read.ok()) {
      ++answered;
      EXPECT_EQ(*read, std::string(64, 'r'));
      continue;
    }
    EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted) << read.status();
    EXPECT_THAT(std::string(read.status().message()),
                HasSubstr("limits.session_queued_commands"));
  }
  EXPECT_LT(answered, kQueuedCommands) << "the kernel holds a place of the limit too";
  EXPECT_TRUE(attacker_->Read(*buffer, 0, 64).ok()) << "reads are accepted once the kernel ran";
}

// A Submit batch holds its commands already: its launches, copies and reads past the
// limit wait for room (off the device thread) instead of being refused, so a batch of
// many times the limit runs whole, and the victim's work goes on meanwhile. (Once, two
// thirds of such a batch came back RESOURCE_EXHAUSTED, depending on how fast the kernels
// ran.)
TEST_F(AdversarialTest, ABatchPastTheQueuedCommandLimitWaitsForRoom) {
  constexpr int kLaunches = 5 * kQueuedCommands;
  absl::StatusOr<v1::CompileResponse> spin = attacker_->Compile(kernels::kSpin, "spin");
  ASSERT_TRUE(spin.ok()) << spin.status();
  absl::StatusOr<Buffer> source = attacker_->Allocate(64);
  absl::StatusOr<Buffer> target = attacker_->Allocate(64);
  ASSERT_TRUE(source.ok() && target.ok());
  ASSERT_TRUE(attacker_->Write(*source, 0, std::string(64, 's')).ok());
  v1::SubmitRequest batch;
  int sequence = 0;
  auto add_command = [&] {
    v1::Command* command = batch.add_commands();
    command->set_sequence(sequence++);
    return command;
  };
  for (int i = 0; i < kLaunches; ++i) {
    v1::CopyRequest* copy = add_command()->mutable_copy();
    copy->set_session(attacker_->token());
    copy->set_source_buffer(source->id());
    copy->set_target_buffer(target->id());
    copy->set_size_bytes(64);
    v1::ReadRequest* read = add_command()->mutable_read();
    read->set_session(attacker_->token());
    read->set_buffer(target->id());
    read->set_size_bytes(64);
    v1::LaunchRequest* launch = add_command()->mutable_launch();
    launch->set_session(attacker_->token());
    launch->set_kernel_id(spin->kernel_id());
    *launch->mutable_grid() = MakeDim3(1);
    *launch->mutable_block() = MakeDim3(1);
    *launch->add_args() = Int64Argument(20'000'000);
  }
  add_command()->mutable_synchronize()->set_session(attacker_->token());
  batch.set_stream_replies(true);

  grpc::ClientContext context;
  auto stream = client_->stub().Submit(&context);
  ASSERT_TRUE(stream->Write(batch));
  stream->WritesDone();
  std::vector<v1::CommandReply> replies;
  v1::SubmitResponse response;
  bool victim_served_meanwhile = false;
  while (stream->Read(&response)) {
    replies.insert(replies.end(), response.replies().begin(), response.replies().end());
    if (!response.batch_done() && !victim_served_meanwhile) {
      victim_served_meanwhile = victim_->Read(*kept_, 0, 16).value_or("") == kVictimBytes;
    }
  }
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(replies.size(), static_cast<size_t>(sequence));
  for (const v1::CommandReply& reply : replies) {
    EXPECT_EQ(reply.status().code(), 0) << reply.sequence() << ": " << reply.status().message();
    if (reply.has_read()) {
      EXPECT_EQ(reply.read().data(), std::string(64, 's'));
    }
  }
  EXPECT_TRUE(victim_served_meanwhile) << "another session was served while the batch waited";
  // A unary launch past the limit is still refused: its client retries.
  ASSERT_TRUE(attacker_->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                                {Int64Argument(2'000'000'000)})
                  .ok());
  absl::Status refused;
  for (int i = 0; i < 2 * kQueuedCommands && refused.ok(); ++i) {
    refused = attacker_->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)}, {Int64Argument(0)});
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(attacker_->Synchronize().ok());
}

TEST_F(AdversarialTest, IncludesCannotReadFilesOutsideTheCompiler) {
  for (const char* header : {"/etc/passwd", "../../../../../../etc/passwd", "/dev/zero",
                             "/proc/self/environ"}) {
    absl::Status compiled = CompileOnly(std::string("#include \"") + header + "\"\n" +
                                        "extern \"C\" __global__ void attack(long long* out) {}\n");
    EXPECT_EQ(compiled.code(), absl::StatusCode::kInvalidArgument) << header << ": " << compiled;
    EXPECT_THAT(std::string(compiled.message()), HasSubstr("Permission denied")) << header;
    EXPECT_THAT(std::string(compiled.message()), Not(HasSubstr("root:"))) << header;
  }
}

TEST_F(AdversarialTest, IncbinCannotReadFilesInAnySpelling) {
  absl::Status compiled = CompileOnly(R"(
      #define CAT(a, b) a##b
      CAT(__as, m__)(".section .rodata\n.incbin \"/etc/passwd\"");
      extern "C" __global__ void attack(long long* out) { out[0] = 1; })");
  EXPECT_EQ(compiled.code(), absl::StatusCode::kInvalidArgument) << "the assembler read it";
  // Refused as inline assembly (the sandbox, which keeps the assembler from opening the
  // file, is the backstop), with nothing of the file's contents.
  EXPECT_THAT(std::string(compiled.message()), HasSubstr("inline assembly"));
  EXPECT_THAT(std::string(compiled.message()), Not(HasSubstr("root:")));
}

// Code that would run when the executor loads the module, in the spellings C++ offers.
TEST_F(AdversarialTest, ModulesCannotRunCodeWhenTheyLoad) {
  const std::string marker = Marker("constructor");
  const std::string effect =
      "extern \"C\" __device__ int system(const char*); "
      "static __device__ int Run() { return system(\"touch " +
      marker + "\"); }\n";
  for (const char* loader :
       {"__attribute__((constructor)) static __device__ void Load() { Run(); }",
        "#define ON_LOAD __attribute__((cons##tructor))\n"
        "ON_LOAD static __device__ void Load() { Run(); }",
        "[[gnu::destructor]] static __device__ void Unload() { Run(); }",
        "static __device__ int loaded = Run();",
        "struct Loader { __device__ Loader() { Run(); } }; static __device__ Loader loader;",
        "static __device__ void Load() { Run(); }\n"
        "__attribute__((section(\".init_array\"), used)) static __device__ void (*hook)() = "
        "Load;",
        "extern \"C\" __device__ void* Resolve() { Run(); return nullptr; }\n"
        "extern \"C\" __device__ void hooked() __attribute__((ifunc(\"Resolve\")));"}) {
    absl::Status compiled =
        CompileOnly(effect + loader + "\nextern \"C\" __global__ void attack(long long* out) {}");
    EXPECT_EQ(compiled.code(), absl::StatusCode::kInvalidArgument) << loader << ": " << compiled;
    EXPECT_THAT(std::string(compiled.message()), HasSubstr("load")) << loader;
  }
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a module's load-time code ran";
}

TEST_F(AdversarialTest, ACompilerTimeBombStopsAtTheLimitAndLeavesNoProcess) {
  std::string marker = "GPUCMD_TIME_BOMB_" + std::to_string(getpid());
  absl::Status compiled = CompileOnly(R"(
      constexpr unsigned long Spin(unsigned long seed) {
        unsigned long x = seed;
        for (unsigned long i = 0; i < 250000; ++i)
          for (unsigned long j = 0; j < 30000; ++j) x += i ^ j;
        return x;
      }
      constexpr unsigned long kA = Spin(1), kB = Spin(2), kC = Spin(3), kD = Spin(4);
      constexpr unsigned long kE = Spin(5), kF = Spin(6), kG = Spin(7), kH = Spin(8);
      extern "C" __global__ void attack(long long* out) {
        out[0] = kA + kB + kC + kD + kE + kF + kG + kH;
      })",
                                      {"-D" + marker});
  EXPECT_EQ(compiled.code(), absl::StatusCode::kResourceExhausted) << compiled;
  EXPECT_THAT(std::string(compiled.message()), HasSubstr("limit"));
  EXPECT_TRUE(NoProcessMatches(marker)) << "a compiler process is left";
}

TEST_F(AdversarialTest, ACompilerMemoryBombStopsAtTheLimit) {
  absl::Status compiled = CompileOnly(R"(
      #define A "xxxxxxxxxxxxxxxx"
      #define B A A A A A A A A A A A A A A A A
      #define C B B B B B B B B B B B B B B B B
      #define D C C C C C C C C C C C C C C C C
      #define E D D D D D D D D D D D D D D D D
      #define F E E E E E E E E E E E E E E E E
      __device__ const char* bomb = F;
      extern "C" __global__ void attack(long long* out) { out[0] = bomb[0]; })");
  EXPECT_EQ(compiled.code(), absl::StatusCode::kResourceExhausted) << compiled;
  EXPECT_THAT(std::string(compiled.message()), HasSubstr("memory limit"));
}

// Compile requests hold their source while they wait, and all of them together are
// bounded (compile.max_waiting_source_bytes): a source past what may wait is refused at
// once, naming the limit, and compiles within it go on.
TEST_F(AdversarialTest, KernelSourcesPastTheCompileBudgetAreRefused) {
  const std::string kernel = "extern \"C\" __global__ void attack(long long* out) { out[0] = 1; }\n";
  const std::string padding = "// " + std::string(kWaitingSourceBytes, 'x') + "\n";
  absl::Status refused = CompileOnly(padding + kernel);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("compile.max_waiting_source_bytes"));
  EXPECT_TRUE(CompileOnly(kernel).ok()) << "a compile within the budget";
}

// Errors long enough to overflow a header (a compile log, a huge id echoed back) reach a
// client with gRPC's default limits as what they are, the whole log in a body.
TEST_F(AdversarialTest, LongErrorsFitAClientsDefaultLimits) {
  std::string source = "extern \"C\" __global__ void noisy(int* out) {\n";
  for (int i = 0; i < 120; ++i) {  // an error each, with its context: over 8 KiB of log
    source += "  out[" + std::to_string(i) + "] = undefined_" + std::to_string(i) + ";\n";
  }
  source += "}\n";
  auto stub = v1::GpuCommand::NewStub(
      grpc::CreateChannel(daemon_->grpc_target(), grpc::InsecureChannelCredentials()));
  v1::CompileRequest compile;
  compile.set_session(attacker_->token());
  compile.set_source(source);
  compile.set_entry_point("noisy");
  grpc::ClientContext context;
  v1::CompileResponse compiled;
  grpc::Status status = stub->Compile(&context, compile, &compiled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_LE(status.error_message().size(), 2048u);
  EXPECT_THAT(status.error_message(), HasSubstr("undefined_0"));
  EXPECT_THAT(status.error_message(), HasSubstr("more bytes cut"));
  {  // the same compile in a batch: its reply's status is cut alike
    grpc::ClientContext batch_context;
    auto batch_stream = stub->Submit(&batch_context);
    v1::SubmitRequest batch;
    v1::Command* command = batch.add_commands();
    command->set_sequence(7);
    *command->mutable_compile() = compile;
    batch_stream->WriteLast(batch, grpc::WriteOptions());
    v1::SubmitResponse replies;
    ASSERT_TRUE(batch_stream->Read(&replies));
    ASSERT_EQ(replies.replies_size(), 1);
    EXPECT_EQ(replies.replies(0).status().code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(replies.replies(0).status().message(), status.error_message());
    EXPECT_TRUE(batch_stream->Finish().ok());
  }
  auto id = context.GetServerTrailingMetadata().find("gpucmd-kernel-id");
  ASSERT_NE(id, context.GetServerTrailingMetadata().end());

  grpc::ClientContext log_context;
  v1::GetCompileLogRequest log_request;
  log_request.set_session(attacker_->token());
  log_request.set_kernel_id(std::string(id->second.data(), id->second.size()));
  v1::GetCompileLogResponse log;
  ASSERT_TRUE(stub->GetCompileLog(&log_context, log_request, &log).ok());
  EXPECT_TRUE(log.failed());
  EXPECT_GT(log.log().size(), 8192u);
  EXPECT_THAT(log.log(), HasSubstr("undefined_119"));
  absl::StatusOr<v1::CompileResponse> through_client = attacker_->Compile(source, "noisy");
  EXPECT_EQ(through_client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(through_client.status().message()), HasSubstr("undefined_119"))
      << "the client library gives the whole log";

  v1::LaunchRequest launch;
  launch.set_session(attacker_->token());
  launch.set_kernel_id(std::string(8000, 'k'));
  grpc::ClientContext launch_context;
  v1::LaunchResponse launched;
  status = stub->Launch(&launch_context, launch, &launched);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_LT(status.error_message().size(), 200u);
}

// Sessions per client count by Unix user, whatever their names (sessions_test shows that
// another user keeps a quota of its own).
TEST_F(AdversarialTest, SessionsAndClientNamesHaveLimits) {
  std::vector<Session> sessions;
  absl::Status refused;
  for (int i = 0; i <= kSessionsPerClient && refused.ok(); ++i) {
    absl::StatusOr<Session> session = client_->OpenSession(0, absl::StrCat("greedy-", i));
    if (session.ok()) {
      sessions.push_back(*std::move(session));
    } else {
      refused = session.status();
    }
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("limits.max_sessions_per_client"));
  absl::StatusOr<v1::ListSessionsResponse> mine = client_->ListSessions();
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->sessions_size(), kSessionsPerClient) << "this user's, the fixture's included";
  EXPECT_FALSE(client_->OpenSession(0, "modest").ok()) << "a new name is the same client";
  ASSERT_TRUE(sessions.back().Close().ok());
  EXPECT_TRUE(client_->OpenSession(0, "greedy").ok()) << "a closed session gives its place";

  absl::StatusOr<Session> named = client_->OpenSession(0, std::string(1 << 20, 'n'));
  EXPECT_EQ(named.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(named.status().message()), HasSubstr("limits.max_client_name_bytes"));
  EXPECT_LT(named.status().message().size(), 200u);
}

// A body that is not a protobuf message gets INVALID_ARGUMENT saying so, from every RPC,
// unary or streaming; an empty body is a valid (empty) message and is not.
TEST_F(AdversarialTest, RequestsThatDoNotParseAreInvalidArgument) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "gpucmd.v1.GpuCommand");
  ASSERT_NE(service, nullptr);
  auto channel = grpc::CreateChannel(daemon_->grpc_target(), grpc::InsecureChannelCredentials());
  for (const std::string& garbage : {std::string("\xff\xff\xff\xff\x0f", 5),
                                     std::string("\x0a\x05" "ab", 4)}) {
    for (int m = 0; m < service->method_count(); ++m) {
      const std::string method = "/gpucmd.v1.GpuCommand/" + service->method(m)->name();
      grpc::Status status = CallWithRawBody(channel, method, garbage);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << ": " << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr("could not be parsed")) << method;
    }
  }
  grpc::Status empty = CallWithRawBody(channel, "/gpucmd.v1.GpuCommand/ListDevices", "");
  EXPECT_TRUE(empty.ok()) << empty.error_message();
}

// Streamed writes that declare their size and then hold back the bytes cannot make the
// daemon keep more than the session's inline budget: of three such writes of 4 MiB with
// a budget of 8 MiB, one is refused at its header, whichever the daemon read last.
TEST_F(AdversarialTest, OpenWritesHoldAtMostTheSessionsInlineBudget) {
  absl::StatusOr<Buffer> buffer = attacker_->Allocate(4 << 20);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  // A quarter of a 4 MiB write, then nothing more until `deadline`.
  auto open_write = [&](OpenWrite& write, std::chrono::seconds deadline) {
    StartWrite(write, *attacker_, *buffer, 4 << 20, deadline);
  };
  OpenWrite held[3];
  for (OpenWrite& write : held) open_write(write, std::chrono::seconds(3));
  int refused = 0, waited = 0;
  for (OpenWrite& write : held) {
    grpc::Status status = write.stream->Finish();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(status.error_message(), HasSubstr("limits.max_inline_bytes_per_session"));
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
      ++waited;
    }
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(waited, 2);

  // The abandoned writes give their share back: two whole writes fit again.
  auto write_whole = [&] {
    OpenWrite write;
    open_write(write, std::chrono::seconds(10));
    v1::WriteRequest rest;
    rest.set_data(std::string(3 << 20, 'y'));
    write.stream->Write(rest);
    write.stream->WritesDone();
    return write.stream->Finish();
  };
  grpc::Status whole = write_whole();
  for (int attempt = 0; attempt < 50 && !whole.ok(); ++attempt) {  // cancellations land
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    whole = write_whole();
  }
  EXPECT_TRUE(whole.ok()) << whole.error_message();
  grpc::Status again = write_whole();
  EXPECT_TRUE(again.ok()) << again.error_message() << ": a finished write gave its share back";
}

// A copy that can never succeed is not told to retry: one past its buffer's end, or of
// a buffer the session does not own, is INVALID_ARGUMENT or NOT_FOUND even when its
// bytes would also pass the session's inline budget; only a valid one is
// RESOURCE_EXHAUSTED, naming the budget.
TEST_F(AdversarialTest, CopiesPastTheirBufferAreRefusedAsSuchPastTheInlineBudgetToo) {
  constexpr uint64_t kPastTheBudget = 2 * kInlineBytesPerSession;
  absl::StatusOr<Buffer> small = attacker_->Allocate(4096);
  ASSERT_TRUE(small.ok()) << small.status();
  absl::StatusOr<Buffer> large = attacker_->Allocate(kPastTheBudget);
  ASSERT_TRUE(large.ok()) << large.status();
  absl::StatusOr<Buffer> foreign = victim_->Allocate(kPastTheBudget);
  ASSERT_TRUE(foreign.ok()) << foreign.status();

  auto read = [&](const Buffer& buffer, uint64_t offset) {
    return attacker_->Read(buffer, offset, kPastTheBudget).status();
  };
  auto write = [&](uint64_t buffer, uint64_t offset) {
    OpenWrite open;
    open.context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    open.stream = client_->stub().Write(&open.context, &open.response);
    v1::WriteRequest header;
    header.mutable_header()->set_session(attacker_->token());
    header.mutable_header()->set_buffer(buffer);
    header.mutable_header()->set_offset_bytes(offset);
    header.mutable_header()->set_inline_size_bytes(kPastTheBudget);
    open.stream->Write(header);  // the payload never comes: the header is answered
    return open.stream->Finish();
  };
  auto batch_read = [&](uint64_t buffer, uint64_t offset) {
    v1::Command command;
    v1::ReadRequest* read = command.mutable_read();
    read->set_session(attacker_->token());
    read->set_buffer(buffer);
    read->set_offset_bytes(offset);
    read->set_size_bytes(kInlineBytesPerSession / 2);
    return command;
  };

  EXPECT_EQ(read(*small, 0).code(), absl::StatusCode::kInvalidArgument) << read(*small, 0);
  EXPECT_EQ(read(*large, 1).code(), absl::StatusCode::kInvalidArgument) << read(*large, 1);
  EXPECT_EQ(read(*foreign, 0).code(), absl::StatusCode::kNotFound) << read(*foreign, 0);
  absl::Status valid = read(*large, 0);
  EXPECT_EQ(valid.code(), absl::StatusCode::kResourceExhausted) << valid;
  EXPECT_THAT(valid.message(), HasSubstr("limits.max_inline_bytes_per_session"));

  EXPECT_EQ(write(small->id(), 0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(write(large->id(), 1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(write(foreign->id(), 0).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status valid_write = write(large->id(), 0);
  EXPECT_EQ(valid_write.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(valid_write.error_message(), HasSubstr("limits.max_inline_bytes_per_session"));

  // In a batch: three reads of half the budget each, so that the third passes it.
  v1::SubmitRequest batch;
  *batch.add_commands() = batch_read(large->id(), 0);
  *batch.add_commands() = batch_read(large->id(), 0);
  *batch.add_commands() = batch_read(small->id(), 0);
  *batch.add_commands() = batch_read(large->id(), 0);
  grpc::ClientContext context;
  auto stream = client_->stub().Submit(&context);
  ASSERT_TRUE(stream->Write(batch));
  stream->WritesDone();
  std::vector<v1::CommandReply> replies;
  for (v1::SubmitResponse response; stream->Read(&response);) {
    replies.insert(replies.end(), response.replies().begin(), response.replies().end());
  }
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies[0].status().code(), grpc::StatusCode::OK) << replies[0].status().message();
  EXPECT_EQ(replies[1].status().code(), grpc::StatusCode::OK) << replies[1].status().message();
  EXPECT_EQ(replies[2].status().code(), grpc::StatusCode::INVALID_ARGUMENT)
      << replies[2].status().message();
  EXPECT_EQ(replies[3].status().code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << replies[3].status().message();

  // Nothing stays reserved: the budget serves a valid read again.
  absl::StatusOr<std::string> afterwards = attacker_->Read(*large, 0, kInlineBytesPerSession);
  EXPECT_TRUE(afterwards.ok()) << afterwards.status();
}

// A channel of its own connection to the daemon at `target` (gRPC otherwise shares one
// connection among channels with the same arguments).
std::unique_ptr<v1::GpuCommand::Stub> StubOfItsOwnConnection(const std::string& target) {
  grpc::ChannelArguments own_connection;
  own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1::GpuCommand::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), own_connection));
}

// ListDevices on `stub`, giving up after two seconds.
grpc::Status ListDevicesOn(v1::GpuCommand::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ListDevicesRequest request;
  v1::ListDevicesResponse response;
  return stub.ListDevices(&context, request, &response);
}

// A client that opened connections without end would take the daemon's descriptors from
// every other user: one user's Unix connections beyond limits.max_connections_per_client
// are closed as soon as they are accepted, and logged; one that ends gives its place back.
TEST_F(AdversarialTest, AUsersConnectionsBeyondItsLimitAreRefused) {
  // The fixture's client holds one of this user's connections.
  std::vector<std::unique_ptr<v1::GpuCommand::Stub>> admitted;
  for (int i = 1; i < kConnectionsPerClient; ++i) {
    admitted.push_back(StubOfItsOwnConnection(daemon_->grpc_target()));
    grpc::Status served = ListDevicesOn(*admitted.back());
    ASSERT_TRUE(served.ok()) << i << ": " << served.error_message();
  }
  std::unique_ptr<v1::GpuCommand::Stub> refused = StubOfItsOwnConnection(daemon_->grpc_target());
  EXPECT_EQ(ListDevicesOn(*refused).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(daemon_->StderrText(), HasSubstr("limits.max_connections_per_client"));
  for (const auto& stub : admitted) EXPECT_TRUE(ListDevicesOn(*stub).ok()) << "still served";

  admitted.pop_back();  // its channel goes, and with it the connection
  bool served_again = false;
  for (int attempt = 0; attempt < 50 && !served_again; ++attempt) {
    served_again = ListDevicesOn(*StubOfItsOwnConnection(daemon_->grpc_target())).ok();
    if (!served_again) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served_again) << "an ended connection gives its place back";
}

// Every open call costs the daemon some tens of KiB, whatever it asks: 50,000
// Synchronize calls waiting behind a long kernel, on one connection, held 1.1 GB. A
// connection now has at most limits.max_calls_per_connection calls open: the client's
// further calls wait in its channel, and all of them are answered once the kernel ended
// (OK, or RESOURCE_EXHAUSTED when they found the session's device queue full).
TEST_F(AdversarialTest, AConnectionHasAtMostItsLimitOfCallsOpen) {
  constexpr int kCalls = 4 * kCallsPerConnection;
  grpc::ChannelArguments own_connection;
  own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::GpuCommand::NewStub(grpc::CreateCustomChannel(
      daemon_->grpc_target(), grpc::InsecureChannelCredentials(), own_connection));
  const uint64_t open_before = MetricValue("gpucmd_rpcs_in_flight");
  LaunchAttackersLongKernel();
  struct Pending {
    grpc::ClientContext context;
    v1::SynchronizeRequest request;
    v1::SynchronizeResponse response;
  };
  std::vector<Pending> calls(kCalls);
  std::atomic<int> answered{0}, as_documented{0};
  for (Pending& call : calls) {
    call.context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    call.request.set_session(attacker_->token());
    stub->async()->Synchronize(&call.context, &call.request, &call.response,
                               [&](grpc::Status status) {
                                 // Or refused while its session's queue was full.
                                 if (status.ok() ||
                                     absl::StrContains(status.error_message(),
                                                       "limits.session_queued_commands")) {
                                   ++as_documented;
                                 }
                                 ++answered;
                               });
  }
  uint64_t most_open = 0;
  for (int look = 0; look < 20; ++look) {  // a second of the kernel's three
    most_open = std::max(most_open, MetricValue("gpucmd_rpcs_in_flight") - open_before);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LE(most_open, static_cast<uint64_t>(kCallsPerConnection));
  EXPECT_GE(most_open, static_cast<uint64_t>(kCallsPerConnection) / 2)
      << "the calls reached the daemon";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (answered < kCalls && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(answered, kCalls);
  EXPECT_EQ(as_documented, kCalls) << "the calls that waited in the channel ran too";
}

// Note [Cancelled calls end at once]: calls waiting behind a long kernel that their
// client cancels end at once, not when the kernel ends (before, a client that cancelled
// its calls and opened new ones piled them up without end).
TEST_F(AdversarialTest, CancelledWaitingCallsEndAtOnce) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  // Polls until `open` calls are open, as far as `give_up`; returns whether they were.
  auto await_open = [&](uint64_t open) {
    return AwaitValue([&] { return MetricValue("gpucmd_rpcs_in_flight"); }, open, give_up) ==
           open;
  };
  ASSERT_TRUE(await_open(2)) << "the attacker's and the victim's leases";
  std::atomic<bool> kernel_ended{false};
  std::thread waiter = RunAttackersLongKernel(kernel_ended, 8'000'000'000);
  EXPECT_TRUE(await_open(3)) << "the waiter's Synchronize";
  // Within the session's queued-command limit with the kernel and the waiter's call.
  constexpr int kCalls = kQueuedCommands - 2;
  struct Pending {
    grpc::ClientContext context;
    v1::SynchronizeRequest request;
    v1::SynchronizeResponse response;
  };
  std::vector<Pending> calls(kCalls);
  std::atomic<int> answered{0};
  for (Pending& call : calls) {
    call.request.set_session(attacker_->token());
    client_->stub().async()->Synchronize(&call.context, &call.request, &call.response,
                                         [&](grpc::Status) { ++answered; });
  }
  EXPECT_TRUE(await_open(3 + kCalls)) << "the calls wait behind the kernel";
  for (Pending& call : calls) call.context.TryCancel();
  EXPECT_TRUE(await_open(3)) << "the cancelled calls ended";
  EXPECT_FALSE(kernel_ended) << "they ended only with the kernel";
  waiter.join();
  EXPECT_EQ(answered, kCalls);
}

// Note [Inline payload budget]: sessions each within their own inline budget together
// hold at most the daemon's (limits.max_inline_bytes): two sessions' open 8 MiB writes
// take the 16 MiB (as GetStats, its per-session figure and /metrics say), a third
// session's write is RESOURCE_EXHAUSTED naming that limit, and it fits once one of the
// others ended.
TEST_F(AdversarialTest, OpenWritesOfAllSessionsHoldAtMostTheDaemonsInlineBudget) {
  constexpr uint64_t kWriteBytes = kInlineBytesPerSession;
  std::vector<Session> sessions;
  std::vector<Buffer> buffers;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Session> session = client_->OpenSession(0, absl::StrCat("writer", i));
    ASSERT_TRUE(session.ok()) << session.status();
    absl::StatusOr<Buffer> buffer = session->Allocate(kWriteBytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    sessions.push_back(*std::move(session));
    buffers.push_back(*std::move(buffer));
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  // Polls until the writes of all sessions hold `bytes`, as far as `give_up`: a write
  // started before the last one's header was taken could take its share instead.
  auto await_held = [&](uint64_t bytes) {
    auto held = [&]() -> uint64_t {
      absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats();
      return stats.ok() ? stats->inline_bytes_held() : ~uint64_t{0};
    };
    return AwaitValue(held, bytes, give_up);
  };
  OpenWrite first, second;
  StartWrite(first, sessions[0], buffers[0], kWriteBytes, std::chrono::seconds(60));
  ASSERT_EQ(await_held(kWriteBytes), kWriteBytes);
  StartWrite(second, sessions[1], buffers[1], kWriteBytes, std::chrono::seconds(60));
  ASSERT_EQ(await_held(2 * kWriteBytes), 2 * kWriteBytes);
  absl::StatusOr<v1::GetStatsResponse> own = sessions[0].Stats();
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->session().inline_bytes_held(), kWriteBytes) << "the session's own share";
  EXPECT_EQ(MetricValue("gpucmd_inline_bytes"), 2 * kWriteBytes);
  {
    OpenWrite third;
    StartWrite(third, sessions[2], buffers[2], kWriteBytes, std::chrono::seconds(10));
    third.stream->WritesDone();
    grpc::Status refused = third.stream->Finish();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << refused.error_message();
    EXPECT_THAT(refused.error_message(), HasSubstr("limits.max_inline_bytes)"));
  }
  first.context.TryCancel();
  first.stream->Finish();
  ASSERT_EQ(await_held(kWriteBytes), kWriteBytes) << "the cancelled write let go";
  OpenWrite third;
  StartWrite(third, sessions[2], buffers[2], kWriteBytes, std::chrono::seconds(10));
  v1::WriteRequest rest;
  rest.set_data(std::string(kWriteBytes - kWriteBytes / 4, 'y'));
  third.stream->Write(rest);
  third.stream->WritesDone();
  grpc::Status fits = third.stream->Finish();
  EXPECT_TRUE(fits.ok()) << fits.error_message();
  second.context.TryCancel();
  second.stream->Finish();
  EXPECT_EQ(await_held(0), 0u) << "nothing held once the writes ended";
}

// A read's bytes count against the session's inline budget until they are handed to
// gRPC: reads queued behind a kernel, whose bytes the daemon would hold until their
// clients read them, are refused past it (three reads of 4 MiB against 8 MiB: one is
// refused, whichever the daemon took last). Reads the client takes in turn never are,
// however fast the next follows the last answer.
TEST_F(AdversarialTest, ReadsHoldAtMostTheSessionsInlineBudget) {
  constexpr uint64_t kReadBytes = kInlineBytesPerSession / 2;
  const std::string bytes = RandomBytes(kInlineBytesPerSession, 12);
  Buffer buffer = AttackerBufferHolding(bytes);
  absl::StatusOr<v1::CompileResponse> spin = attacker_->Compile(kernels::kSpin, "spin");
  ASSERT_TRUE(spin.ok()) << spin.status();
  // Long enough that the three reads arrive while it runs, on a loaded machine too.
  ASSERT_TRUE(attacker_->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                                {Int64Argument(2'000'000'000)})
                  .ok());
  struct HeldRead {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::ReadResponse>> stream;
  };
  HeldRead held[3];
  v1::ReadRequest request;
  request.set_session(attacker_->token());
  request.set_buffer(buffer.id());
  request.set_size_bytes(kReadBytes);
  for (HeldRead& read : held) read.stream = client_->stub().Read(&read.context, request);
  int refused = 0, answered = 0;
  for (HeldRead& read : held) {
    std::string data;
    v1::ReadResponse chunk;
    while (read.stream->Read(&chunk)) data += chunk.data();
    grpc::Status status = read.stream->Finish();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(status.error_message(), HasSubstr("limits.max_inline_bytes_per_session"));
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_TRUE(data == bytes.substr(0, kReadBytes)) << "the read's bytes";
      ++answered;
    }
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(answered, 2);

  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<std::string> whole = attacker_->Read(buffer, 0, kInlineBytesPerSession);
    ASSERT_TRUE(whole.ok()) << "read " << i << ": " << whole.status();
    EXPECT_TRUE(*whole == bytes);
  }
}

// The same for reads in Submit batches: a batch's reads past the budget are refused
// with it named, and a batch that takes the whole budget can follow the answer of the
// last at once.
TEST_F(AdversarialTest, ReadsInBatchesHoldAtMostTheSessionsInlineBudget) {
  constexpr uint64_t kReadBytes = kInlineBytesPerSession / 2;
  const std::string bytes = RandomBytes(kReadBytes, 13);
  Buffer buffer = AttackerBufferHolding(bytes);
  auto reads = [&](int count) {
    v1::SubmitRequest batch;
    for (int i = 0; i < count; ++i) {
      v1::Command* command = batch.add_commands();
      command->set_sequence(i);
      command->mutable_read()->set_session(attacker_->token());
      command->mutable_read()->set_buffer(buffer.id());
      command->mutable_read()->set_size_bytes(kReadBytes);
    }
    return batch;
  };
  grpc::ClientContext context;
  auto stream = client_->stub().Submit(&context);
  // Every reply of one batch, whatever the number of responses.
  auto replies_of = [&](const v1::SubmitRequest& batch) {
    EXPECT_TRUE(stream->Write(batch));
    std::vector<v1::CommandReply> replies;
    v1::SubmitResponse response;
    while (stream->Read(&response)) {
      replies.insert(replies.end(), response.replies().begin(), response.replies().end());
      if (response.batch_done()) break;
    }
    return replies;
  };
  std::vector<v1::CommandReply> three = replies_of(reads(3));
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].status().code(), 0) << three[0].status().message();
  EXPECT_TRUE(three[0].read().data() == bytes);
  EXPECT_EQ(three[1].status().code(), 0) << three[1].status().message();
  EXPECT_EQ(three[2].status().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(three[2].status().message(), HasSubstr("limits.max_inline_bytes_per_session"));
  for (int i = 0; i < 20; ++i) {
    std::vector<v1::CommandReply> two = replies_of(reads(2));
    ASSERT_EQ(two.size(), 2u);
    for (const v1::CommandReply& reply : two) {
      EXPECT_EQ(reply.status().code(), 0) << "batch " << i << ": " << reply.status().message();
    }
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Note [Memory the Submit streams hold]: streams of the biggest batches the daemon takes
// (16384 commands, each taking some hundreds of bytes once converted), sent ahead with
// their answers unread (here behind a long kernel, so that none is answered soon), held
// gigabytes. All streams together now hold at most limits.max_submit_bytes: /metrics
// shows the bytes held, never past the limit; once the streams read their answers, some
// end RESOURCE_EXHAUSTED naming it and the others OK; nothing is held once they ended.
// The victim's batches still run.
TEST_F(AdversarialTest, ManySubmitStreamsHoldAtMostTheDaemonsSubmitBudget) {
  v1::SubmitRequest batch;
  for (int i = 0; i < 16384; ++i) {
    v1::Command* command = batch.add_commands();
    command->set_sequence(i);
    command->mutable_synchronize()->set_session(attacker_->token());
  }
  LaunchAttackersLongKernel();  // the batches' synchronizes wait for it: they stay held
  // Each stream holds at least five batches of about 1 MB before it waits on its unread
  // answers: twice the limit in all.
  constexpr int kStreams = 32;
  std::vector<grpc::ClientContext> contexts(kStreams);
  std::vector<grpc::Status> ends(kStreams);
  absl::Notification read_answers;
  std::vector<std::thread> attackers;
  for (int i = 0; i < kStreams; ++i) {
    attackers.emplace_back([&, i] {
      auto stream = client_->stub().Submit(&contexts[i]);
      for (int sent = 0; sent < 6 && stream->Write(batch); ++sent) {
      }
      // A refused stream ends once the answers before its refusal are written, which
      // may wait for the client to read them (HTTP/2's flow control).
      read_answers.WaitForNotification();
      stream->WritesDone();
      for (v1::SubmitResponse answer; stream->Read(&answer);) {
      }
      ends[i] = stream->Finish();
    });
  }
  auto submit_bytes = [this] { return MetricValue("gpucmd_submit_bytes"); };
  // Until the bytes held stopped changing: every stream is refused or waits on its
  // unread answers.
  uint64_t most_held = 0;
  uint64_t last = 0;
  auto last_change = std::chrono::steady_clock::now();
  const auto give_up = last_change + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() - last_change < std::chrono::seconds(2) &&
         std::chrono::steady_clock::now() < give_up) {
    const uint64_t held = submit_bytes();
    most_held = std::max(most_held, held);
    if (held != last || held == 0) last_change = std::chrono::steady_clock::now();
    last = held;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  read_answers.Notify();
  for (std::thread& attacker : attackers) attacker.join();
  EXPECT_GT(most_held, 0u);
  EXPECT_LE(most_held, kSubmitBytes);
  int refused = 0;
  for (const grpc::Status& end : ends) {
    if (end.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(end.error_message(), HasSubstr("limits.max_submit_bytes"));
    } else {
      EXPECT_TRUE(end.ok()) << end.error_code() << ": " << end.error_message();
    }
  }
  EXPECT_GT(refused, 0) << "held at most " << most_held << " bytes";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (submit_bytes() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(submit_bytes(), 0u) << "the ended streams gave back all they held";
  v1::SubmitRequest victims;
  v1::Command* allocate = victims.add_commands();
  allocate->mutable_allocate()->set_session(victim_->token());
  allocate->mutable_allocate()->set_size_bytes(64);
  victims.add_commands()->mutable_synchronize()->set_session(victim_->token());
  grpc::ClientContext context;
  auto stream = client_->stub().Submit(&context);
  ASSERT_TRUE(stream->Write(victims));
  stream->WritesDone();
  v1::SubmitResponse replies;
  ASSERT_TRUE(stream->Read(&replies));
  ASSERT_EQ(replies.replies_size(), 2);
  for (const v1::CommandReply& reply : replies.replies()) {
    EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
  }
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace gpucmd
