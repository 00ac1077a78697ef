// Soak and fault runs against a real daemon (CPU driver), in a short form here and
// longer by hand (docs/RELIABILITY.md has the figures and the commands):
//   - clients that die mid-write leave nothing behind once their leases' grace passed;
//   - a flood far past the queues' capacity is answered RESOURCE_EXHAUSTED, with the
//     daemon's memory bounded;
//   - many sessions working at once all make progress, and end with nothing held;
//   - kernel executors killed again and again under load: launches running then fail,
//     nothing else does, and every session's other data stays intact;
//   - SIGTERM under a mixed load: every call ends OK or UNAVAILABLE, every read after an
//     acknowledged write returns that write's bytes, and the exit is within the drain.
// Each prints what it measured (recovery time, peak RSS, throughput spread, latency
// percentiles) as a "SOAK" line. Timing is reported, not asserted, but for generous
// bounds that only a hang would cross. SOAK_SCALE multiplies the client counts.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/kernels/kernel_sources.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::DaemonProcess;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMiB = 1 << 20;
constexpr int kLeaseGraceSeconds = 1;
constexpr int kSessionQueuedCommands = 16;

int Scale() {
  int scale = 1;
  const char* text = std::getenv("SOAK_SCALE");
  return text != nullptr && absl::SimpleAtoi(text, &scale) && scale > 0 ? scale : 1;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The daemon's peak resident set (VmHWM), in MiB.
uint64_t PeakRssMiB(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    uint64_t kib = 0;
    if (line.rfind("VmHWM:", 0) == 0 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 9)), &kib)) {
      return kib / 1024;
    }
  }
  return 0;
}

constexpr char kAddOne[] = R"(
    extern "C" __global__ void add_one(int* x, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] += 1;
    })";

// One round of a working client: zeros into `buffer` (4 KiB), add_one over it, read the
// first int back; DATA_LOSS when it is not 1.
absl::Status AddOneRound(Session& session, const std::string& add_one, const Buffer& buffer) {
  RETURN_IF_ERROR(session.Write(buffer, 0, std::string(4096, '\0')));
  RETURN_IF_ERROR(session.Launch(add_one, {MakeDim3(4), MakeDim3(256)},
                                 {BufferArgument(buffer, v1::ACCESS_READ_WRITE),
                                  Int32Argument(1024)}));
  ASSIGN_OR_RETURN(std::string back, session.Read(buffer, 0, 4));
  if (back[0] != 1) return absl::DataLossError("the kernel's sum is wrong");
  return absl::OkStatus();
}

// Pids of the daemon's kernel executors (its children named gpucmd-kernel-executor).
std::vector<pid_t> ExecutorsOf(pid_t daemon) {
  std::vector<pid_t> executors;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    // One line; read through the stream, which turns a read error into a failed read
    // (a process that exits meanwhile makes reading its stat fail with ESRCH).
    std::string stat;
    std::getline(std::ifstream(entry.path() / "stat"), stat);
    // "pid (comm) state ppid ...": comm is cut to 15 characters.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || stat.find("(gpucmd-kernel-e") == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
    pid_t parent = 0;
    if (fields.size() > 1 && absl::SimpleAtoi(fields[1], &parent) && parent == daemon) {
      executors.push_back(pid);
    }
  }
  return executors;
}

class SoakTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(absl::StrCat(
        "cpu { memory_bytes_per_device: ", 2048 * kMiB, " executor_workers: 2 }\n",
        "compile { cache_dir: \"{dir}/cache\" }\n",
        "limits { session_lease_grace_seconds: ", kLeaseGraceSeconds,
        " session_queued_commands: ", kSessionQueuedCommands,
        " max_sessions_per_client: 4096 }\n"));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Waits (up to `limit`) until no session, used memory or staged bytes are left;
  // seconds it took, or -1.
  double SecondsUntilNothingHeld(std::chrono::seconds limit) {
    const auto start = Clock::now();
    while (Clock::now() - start < limit) {
      absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats();
      if (stats.ok() && stats->sessions_open() == 0 && stats->devices(0).memory_used_bytes() == 0 &&
          stats->devices(0).drop_queue_bytes() == 0) {
        return SecondsSince(start);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

// Clients on connections of their own open a session with its lease, allocate, send
// half of a declared write and vanish (every call of theirs cancelled at once).
TEST_F(SoakTest, ClientsKilledMidWriteLeaveNothingBehind) {
  const int clients = 50 * Scale();
  std::atomic<int> reached_the_write{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto channel = grpc::CreateCustomChannel(daemon_->grpc_target(),
                                               grpc::InsecureChannelCredentials(),
                                               grpc::ChannelArguments());
      auto stub = v1::GpuCommand::NewStub(channel);
      grpc::ClientContext open_context;
      v1::OpenSessionRequest open;
      open.set_client_name(absl::StrCat("doomed-", c));
      v1::OpenSessionResponse opened;
      if (!stub->OpenSession(&open_context, open, &opened).ok()) return;
      grpc::ClientContext lease_context;
      auto lease = stub->KeepAlive(&lease_context);
      v1::KeepAliveRequest hello;
      hello.set_session(opened.session());
      v1::KeepAliveResponse ack;
      if (!lease->Write(hello) || !lease->Read(&ack)) return;
      grpc::ClientContext allocate_context;
      v1::AllocateRequest allocate;
      allocate.set_session(opened.session());
      allocate.set_size_bytes(2 * kMiB);
      v1::AllocateResponse allocated;
      if (!stub->Allocate(&allocate_context, allocate, &allocated).ok()) return;
      grpc::ClientContext write_context;
      v1::WriteResponse written;
      auto writer = stub->Write(&write_context, &written);
      v1::WriteRequest first;
      first.mutable_header()->set_session(opened.session());
      first.mutable_header()->set_buffer(allocated.buffer());
      first.mutable_header()->set_inline_size_bytes(2 * kMiB);
      first.set_data(std::string(kMiB, 'x'));
      if (writer->Write(first)) ++reached_the_write;
      write_context.TryCancel();
      lease_context.TryCancel();
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(reached_the_write.load(), clients);
  const double recovered = SecondsUntilNothingHeld(std::chrono::seconds(kLeaseGraceSeconds + 30));
  std::cout << "SOAK killed_mid_write clients=" << clients << " recovered_s=" << recovered
            << " (lease grace " << kLeaseGraceSeconds << " s) peak_rss_mib="
            << PeakRssMiB(daemon_->pid()) << "\n";
  EXPECT_GE(recovered, 0) << "sessions, memory or staged bytes were still held";
}

// Launches of a kernel that spins, from many sessions at once, each ten times what a
// session may have queued: the excess is RESOURCE_EXHAUSTED, nothing else fails, memory
// stays bounded, and everything is released afterwards.
TEST_F(SoakTest, AFloodIsAnsweredResourceExhausted) {
  const int sessions = 8 * Scale();
  const int launches_each = 10 * kSessionQueuedCommands;
  std::atomic<int> accepted{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < sessions; ++s) {
    threads.emplace_back([&, s] {
      absl::StatusOr<Session> session = client_->OpenSession(0, absl::StrCat("flood-", s));
      if (!session.ok()) return ++other, void();
      absl::StatusOr<v1::CompileResponse> spin = session->Compile(kernels::kSpin, "spin");
      if (!spin.ok()) return ++other, void();
      for (int i = 0; i < launches_each; ++i) {
        absl::Status launched = session->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                                                {Int64Argument(2'000'000)});
        if (launched.ok()) {
          ++accepted;
        } else if (absl::IsResourceExhausted(launched)) {
          ++refused;
        } else {
          ++other;
        }
      }
      if (!session->Synchronize().ok()) ++other;
    });
  }
  for (std::thread& thread : threads) thread.join();
  const uint64_t peak = PeakRssMiB(daemon_->pid());
  std::cout << "SOAK flood sessions=" << sessions << " launches=" << sessions * launches_each
            << " accepted=" << accepted << " refused=" << refused << " other=" << other
            << " peak_rss_mib=" << peak << "\n";
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(refused.load(), 0) << "the flood never met backpressure";
  EXPECT_LT(peak, 1024u) << "the daemon's memory grew with the flood";
  EXPECT_GE(SecondsUntilNothingHeld(std::chrono::seconds(30)), 0);
}

// Many sessions, each on a thread, copy and launch small work for a fixed time: every
// session progresses (the spread of their throughputs and the latency percentiles are
// reported), nothing fails, and nothing is held afterwards.
TEST_F(SoakTest, ManySessionsAllProgress) {
  const int sessions = 40 * Scale();
  const auto duration = std::chrono::seconds(3);
  std::vector<int> rounds(sessions, 0);
  std::vector<std::vector<double>> latencies(sessions);
  std::atomic<int> failures{0};
  Mutex first_failure_mutex;
  std::string first_failure;
  auto fail = [&](absl::string_view what, const absl::Status& status) {
    if (++failures == 1) {
      MutexLock lock(&first_failure_mutex);
      first_failure = absl::StrCat(what, ": ", status.ToString());
    }
  };
  std::vector<std::thread> threads;
  for (int s = 0; s < sessions; ++s) {
    threads.emplace_back([&, s] {
      absl::StatusOr<Session> session = client_->OpenSession(0, "many");
      if (!session.ok()) return fail("open", session.status());
      absl::StatusOr<v1::CompileResponse> add = session->Compile(kAddOne, "add_one");
      if (!add.ok()) return fail("compile", add.status());
      absl::StatusOr<Buffer> buffer = session->Allocate(4096);
      if (!buffer.ok()) return fail("allocate", buffer.status());
      const auto end = Clock::now() + duration;
      while (Clock::now() < end) {
        const auto start = Clock::now();
        if (absl::Status round = AddOneRound(*session, add->kernel_id(), *buffer); !round.ok()) {
          return fail("round", round);
        }
        latencies[s].push_back(SecondsSince(start));
        ++rounds[s];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  std::vector<double> all;
  for (const auto& mine : latencies) all.insert(all.end(), mine.begin(), mine.end());
  std::sort(all.begin(), all.end());
  const auto [fewest, most] = std::minmax_element(rounds.begin(), rounds.end());
  ASSERT_FALSE(all.empty());
  std::cout << "SOAK many_sessions sessions=" << sessions << " rounds=" << all.size()
            << " min_over_max=" << static_cast<double>(*fewest) / std::max(*most, 1)
            << " p50_ms=" << 1e3 * all[all.size() / 2]
            << " p99_ms=" << 1e3 * all[all.size() * 99 / 100]
            << " peak_rss_mib=" << PeakRssMiB(daemon_->pid()) << "\n";
  EXPECT_GT(*fewest, 0) << "a session made no progress";
  EXPECT_GE(SecondsUntilNothingHeld(std::chrono::seconds(30)), 0);
}

// While sessions loop write + launch + read, their device's kernel executor is killed
// every 150 ms. A launch running then fails (UNAVAILABLE or ABORTED; a read of what it
// was to write, FAILED_PRECONDITION); nothing else does; bytes no kernel touched stay
// intact; launches run again once the killing stops.
TEST_F(SoakTest, KilledExecutorsLoseOnlyTheLaunchesTheyRan) {
  const int sessions = 6 * Scale();
  const auto duration = std::chrono::seconds(3);
  std::atomic<int> rounds{0}, lost_rounds{0}, wrong{0}, kills{0};
  Mutex first_wrong_mutex;
  std::string first_wrong;
  std::atomic<bool> killing{true};
  std::thread killer([&] {
    while (killing) {
      for (pid_t executor : ExecutorsOf(daemon_->pid())) {
        if (kill(executor, SIGKILL) == 0) ++kills;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
  });
  std::vector<std::thread> threads;
  for (int s = 0; s < sessions; ++s) {
    threads.emplace_back([&, s] {
      auto note_wrong = [&](const std::string& what) {
        if (++wrong == 1) {
          MutexLock lock(&first_wrong_mutex);
          first_wrong = what;
        }
      };
      absl::StatusOr<Session> session = client_->OpenSession(0, "beside-killed-executors");
      if (!session.ok()) return note_wrong(session.status().ToString());
      absl::StatusOr<v1::CompileResponse> add = session->Compile(kAddOne, "add_one");
      absl::StatusOr<Buffer> kept = session->Allocate(4096);
      absl::StatusOr<Buffer> work = session->Allocate(4096);
      if (!add.ok() || !kept.ok() || !work.ok()) return note_wrong("set-up failed");
      const std::string pattern(4096, static_cast<char>('a' + s % 26));
      if (!session->Write(*kept, 0, pattern).ok()) return note_wrong("kept write failed");
      const auto end = Clock::now() + duration;
      while (Clock::now() < end) {
        absl::Status round = AddOneRound(*session, add->kernel_id(), *work);
        if (round.ok()) {
          ++rounds;
        } else if (absl::IsUnavailable(round) || absl::IsAborted(round) ||
                   absl::IsFailedPrecondition(round)) {
          ++lost_rounds;
          session->Synchronize().IgnoreError();  // the launch's error, reported once
        } else {
          return note_wrong(round.ToString());
        }
      }
      absl::StatusOr<std::string> back = session->Read(*kept, 0, pattern.size());
      if (!back.ok() || *back != pattern) note_wrong("the kept buffer changed");
    });
  }
  for (std::thread& thread : threads) thread.join();
  killing = false;
  killer.join();
  EXPECT_EQ(wrong.load(), 0) << first_wrong;
  EXPECT_GT(kills.load(), 0) << "no executor was found to kill";
  std::cout << "SOAK killed_executors sessions=" << sessions << " kills=" << kills
            << " rounds=" << rounds << " lost_rounds=" << lost_rounds
            << " peak_rss_mib=" << PeakRssMiB(daemon_->pid()) << "\n";
  absl::StatusOr<Session> after = client_->OpenSession(0, "after-the-killing");
  ASSERT_TRUE(after.ok()) << after.status();
  absl::StatusOr<v1::CompileResponse> add = after->Compile(kAddOne, "add_one");
  absl::StatusOr<Buffer> buffer = after->Allocate(4096);
  ASSERT_TRUE(add.ok() && buffer.ok());
  // Executors killed between launches cost no launch: the first round runs.
  absl::Status round = AddOneRound(*after, add->kernel_id(), *buffer);
  EXPECT_TRUE(round.ok()) << "kernels run again: " << round;
}

// Clients write, read back, launch and synchronize in a loop while the daemon is told to
// stop. Every call ends OK or UNAVAILABLE (never CANCELLED or a transport error), every
// read that follows an acknowledged write returns that write's bytes, and the daemon
// exits 0 within its drain time and a second.
TEST(SoakShutdownTest, SigtermUnderMixedLoadKeepsAcknowledgedWrites) {
  constexpr int kDrainSeconds = 2;
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(absl::StrCat(
      "drain_timeout_seconds: ", kDrainSeconds, "\n",
      "cpu { executor_workers: 2 }\n", "compile { cache_dir: \"{dir}/cache\" }\n"));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  const int sessions = 8 * Scale();
  std::atomic<int> acknowledged{0}, wrong{0};
  Mutex codes_mutex;
  std::map<std::pair<absl::StatusCode, std::string>, int> codes;  // by code and call
  std::string first_wrong;
  std::atomic<bool> running{true};
  std::vector<std::thread> threads;
  for (int s = 0; s < sessions; ++s) {
    threads.emplace_back([&, s] {
      auto record = [&](const char* call, const absl::Status& status) {
        MutexLock lock(&codes_mutex);
        ++codes[{status.code(), call}];
        return status.ok();
      };
      absl::StatusOr<Session> session = (*client)->OpenSession(0, "until-sigterm");
      if (!record("OpenSession", session.status())) return;
      absl::StatusOr<v1::CompileResponse> add = session->Compile(kAddOne, "add_one");
      absl::StatusOr<Buffer> buffer = session->Allocate(64 << 10);
      if (!record("Compile", add.status()) || !record("Allocate", buffer.status())) return;
      for (int k = 0; running; ++k) {
        const std::string pattern(64 << 10, static_cast<char>('A' + (s + k) % 26));
        if (!record("Write", session->Write(*buffer, 0, pattern))) return;
        ++acknowledged;
        absl::StatusOr<std::string> back = session->Read(*buffer, 0, pattern.size());
        if (!record("Read", back.status())) return;
        if (*back != pattern && ++wrong == 1) {
          MutexLock lock(&codes_mutex);
          first_wrong = absl::StrCat("session ", s, " round ", k, " read other bytes");
        }
        if (!record("Launch", session->Launch(add->kernel_id(), {MakeDim3(1), MakeDim3(64)},
                                    {BufferArgument(*buffer, v1::ACCESS_READ_WRITE),
                                     Int32Argument(64)}))) {
          return;
        }
        if (k % 4 == 0 && !record("Synchronize", session->Synchronize())) return;
      }
    });
  }
  // Signal once every session is under way (compiles take a while on a loaded machine).
  const auto loaded_by = Clock::now() + std::chrono::seconds(30);
  while (acknowledged < 4 * sessions && Clock::now() < loaded_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto signalled = Clock::now();
  const int exit_code = daemon->Stop(SIGTERM, std::chrono::seconds(30));
  const double exit_seconds = SecondsSince(signalled);
  running = false;
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(exit_code, 0);
  EXPECT_LT(exit_seconds, kDrainSeconds + 1) << "the drain did not bound the exit";
  EXPECT_EQ(wrong.load(), 0) << first_wrong;
  std::string seen;
  for (const auto& [code_and_call, count] : codes) {
    const auto& [code, call] = code_and_call;
    absl::StrAppend(&seen, " ", call, ":", absl::StatusCodeToString(code), "=", count);
    EXPECT_TRUE(code == absl::StatusCode::kOk || code == absl::StatusCode::kUnavailable)
        << count << " " << call << " call(s) ended " << absl::StatusCodeToString(code);
  }
  EXPECT_GT(acknowledged.load(), 0);
  std::cout << "SOAK sigterm_mixed_load sessions=" << sessions << " acknowledged_writes="
            << acknowledged << " exit_s=" << exit_seconds << " codes:" << seen << "\n";
}

}  // namespace
}  // namespace gpucmd
