// Soak and fault runs against a real daemon (CPU driver), in a short form here and
// longer by hand (docs/RELIABILITY.md has the figures and the commands):
//   - clients that die mid-write leave nothing behind once their leases' grace passed;
//   - a flood far past the queues' capacity is answered RESOURCE_EXHAUSTED, with the
//     daemon's memory bounded;
//   - many sessions working at once all make progress, and end with nothing held.
// Each prints what it measured (recovery time, peak RSS, throughput spread, latency
// percentiles) as a "SOAK" line. Timing is reported, not asserted, but for generous
// bounds that only a hang would cross. SOAK_SCALE multiplies the client counts.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
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
      absl::StatusOr<v1::CompileResponse> add = session->Compile(R"(
          extern "C" __global__ void add_one(int* x, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] += 1;
          })",
                                                                 "add_one");
      if (!add.ok()) return fail("compile", add.status());
      absl::StatusOr<Buffer> buffer = session->Allocate(4096);
      if (!buffer.ok()) return fail("allocate", buffer.status());
      const std::string zeros(4096, '\0');
      const auto end = Clock::now() + duration;
      while (Clock::now() < end) {
        const auto start = Clock::now();
        absl::Status status = session->Write(*buffer, 0, zeros);
        if (status.ok()) {
          status = session->Launch(add->kernel_id(), {MakeDim3(4), MakeDim3(256)},
                                   {BufferArgument(*buffer, v1::ACCESS_READ_WRITE),
                                    Int32Argument(1024)});
        }
        absl::StatusOr<std::string> back =
            status.ok() ? session->Read(*buffer, 0, 4) : absl::StatusOr<std::string>(status);
        if (!back.ok()) return fail("round", back.status());
        if ((*back)[0] != 1) return fail("round", absl::DataLossError("the kernel's sum is wrong"));
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

}  // namespace
}  // namespace gpucmd
