// A GPU daemon end to end over gRPC on its driver's TEST DOUBLE (there is no GPU here):
// staged writes and reads, contiguous and pitched, and device-to-device copies through
// the real driver code; and a device error. The doubles fault the context when a kernel
// named fake_device_trap runs, as a wild pointer does on a GPU: every session on the
// device then hears UNAVAILABLE, lost handles say so, the context is reset and new work
// runs. One named fake_device_fatal_trap faults it as a real GPU's kernel does, for the
// rest of the process: the daemon then restarts (exit status 75), or, configured to,
// keeps the device down.
//
// One source, one target per driver (cuda_double_test, hip_double_test, built with
// --config=cuda / --config=hip): GPUCMD_EXPECT_DRIVER names the daemon's driver and
// GPUCMD_FAKE_LIBRARY the double (a runfile), whose directory the daemon gets first in
// LD_LIBRARY_PATH.

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_census.h"
#include "tests/testing/random_bytes.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::DaemonDriver;
using ::gpucmd::testing::DaemonProcess;
using ::gpucmd::testing::RunfilePath;
using ::gpucmd::testing::ShortTempDir;
using ::testing::HasSubstr;

class GpuDoubleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* driver = std::getenv("GPUCMD_EXPECT_DRIVER");
    const char* library = std::getenv("GPUCMD_FAKE_LIBRARY");
    ASSERT_TRUE(driver != nullptr && library != nullptr) << "run through its Bazel target";
    ASSERT_EQ(DaemonDriver(), driver) << "build with --config=" << driver;
    // The daemon loads the double instead of the vendor's library.
    std::string fake = RunfilePath(library);
    setenv("LD_LIBRARY_PATH", fake.substr(0, fake.rfind('/')).c_str(), 1);
    StartDaemon("");
  }

  // Starts a daemon on the double with `config` (text format) added to its own.
  void StartDaemon(const std::string& config) {
    std::string directory = ShortTempDir();
    std::ofstream(directory + "/gpucmdd.textproto")
        << "compile { cache_dir: \"" << directory << "/cache\" }\n" << config;
    absl::StatusOr<DaemonProcess> daemon = DaemonProcess::Start(
        {"--listen=unix:" + directory + "/gpucmdd.sock", "--http_listen=127.0.0.1:0",
         "--config=" + directory + "/gpucmdd.textproto"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Launches fake_device_trap or fake_device_fatal_trap (`entry_point`) in `session` and
  // returns its Synchronize.
  absl::Status Fault(Session& session, const std::string& entry_point) {
    absl::StatusOr<Buffer> out = session.Allocate(64);
    EXPECT_TRUE(out.ok()) << out.status();
    absl::StatusOr<v1::CompileResponse> trap = session.Compile(
        "extern \"C\" __global__ void " + entry_point + "(int* out) { out[0] = 1; }",
        entry_point);
    EXPECT_TRUE(trap.ok()) << trap.status();
    if (!out.ok() || !trap.ok()) return absl::InternalError("no faulting kernel");
    absl::Status launched = session.Launch(trap->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                                           {BufferArgument(*out, v1::ACCESS_WRITE)});
    EXPECT_TRUE(launched.ok()) << launched;
    return session.Synchronize();
  }

  Session Open(const std::string& name) {
    absl::StatusOr<Session> session = client_->OpenSession(0, name);
    EXPECT_TRUE(session.ok()) << session.status();
    return *std::move(session);
  }

  std::string Get(const std::string& path) {
    absl::StatusOr<testing::HttpResponse> response =
        testing::HttpGet(daemon_->http_host(), daemon_->http_port(), path);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->body : "";
  }

  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(GpuDoubleTest, CopiesGoThroughTheDriver) {
  Session session = Open("copies");
  const std::string data = testing::RandomBytes(3 << 20, 7);
  absl::StatusOr<Buffer> source = session.Allocate(data.size());
  absl::StatusOr<Buffer> target = session.Allocate(data.size());
  ASSERT_TRUE(source.ok() && target.ok());
  ASSERT_TRUE(session.Write(*source, 0, data).ok());
  EXPECT_EQ(session.Read(*source, 0, data.size()).value_or(""), data);
  ASSERT_TRUE(session.Copy(*source, 100, *target, 0, 5000).ok());
  EXPECT_EQ(session.Read(*target, 0, 5000).value_or(""), data.substr(100, 5000));
  // 16 rows of 100 bytes, 256 bytes apart: a 2D copy both ways.
  const Pitched pitched{.width_bytes = 100, .height = 16, .stride_bytes = 256};
  const std::string rows = data.substr(0, 1600);
  ASSERT_TRUE(session.Write(*target, 64, rows, 0, pitched).ok());
  EXPECT_EQ(session.ReadPitched(*target, 64, pitched).value_or(""), rows);
  EXPECT_TRUE(session.Synchronize().ok());
}

// Note [Waiting for the GPU without spinning] in driver/gpu/gpu_driver.h, through the
// daemon: a Synchronize waits for a launch's event, which the double completes half a
// second after its record; a thread busy-waiting for it would take the daemon half a
// second of CPU.
TEST_F(GpuDoubleTest, ASynchronizeWaitingForTheDeviceLeavesTheDaemonIdle) {
  setenv("GPUCMD_FAKE_EVENT_LATENCY_US", "500000", 1);
  StartDaemon("");
  unsetenv("GPUCMD_FAKE_EVENT_LATENCY_US");
  Session session = Open("waits");
  absl::StatusOr<v1::CompileResponse> empty =
      session.Compile("extern \"C\" __global__ void empty(int n) {}", "empty");
  ASSERT_TRUE(empty.ok()) << empty.status();
  ASSERT_TRUE(session.Launch(empty->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                             {Int32Argument(0)}).ok());
  const testing::ProcessUsage before = testing::UsageOf(daemon_->pid());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(session.Synchronize().ok());
  const testing::ProcessUsage after = testing::UsageOf(daemon_->pid());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(400))
      << "the Synchronize did not wait for the launch's event";
  EXPECT_LT(after.cpu_seconds - before.cpu_seconds, 0.25) << "the daemon spun while it waited";
}

// Note [Completions called back on a GPU], through the daemon: sessions waiting for the
// device hold no thread. Twelve sessions each Synchronize a launch whose event the double
// completes 1.5 s after its record. Were each wait to block a completion thread, the
// daemon would start one for each waiting session beyond its first four.
TEST_F(GpuDoubleTest, SessionsWaitingForTheDeviceHoldNoCompletionThreads) {
  setenv("GPUCMD_FAKE_EVENT_LATENCY_US", "1500000", 1);
  StartDaemon("");
  unsetenv("GPUCMD_FAKE_EVENT_LATENCY_US");
  constexpr int kSessions = 12;
  std::vector<Session> sessions;
  for (int i = 0; i < kSessions; ++i) {
    sessions.push_back(Open("waiting " + std::to_string(i)));
    absl::StatusOr<v1::CompileResponse> empty =
        sessions.back().Compile("extern \"C\" __global__ void empty(int n) {}", "empty");
    ASSERT_TRUE(empty.ok()) << empty.status();
    ASSERT_TRUE(sessions.back().Launch(empty->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                                       {Int32Argument(i)}).ok());
  }
  const int threads_before = testing::ThreadsNamed(daemon_->pid(), "gpucmd-wait0");
  std::vector<absl::AnyInvocable<void()>> waits;
  for (Session& session : sessions) {
    waits.push_back([&session] {
      absl::Status status = session.Synchronize();
      EXPECT_TRUE(status.ok()) << status;
    });
  }
  const int most =
      testing::MostThreadsNamedDuring(daemon_->pid(), "gpucmd-wait0", std::move(waits));
  EXPECT_EQ(most, threads_before)
      << "waiting sessions held completion threads (" << threads_before << " before)";
}

TEST_F(GpuDoubleTest, SharedMemoryRegionsAreRegisteredWithTheDevice) {
  Session session = Open("shared");
  constexpr uint64_t kSize = (5 << 20) + 3;
  absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(session, 2 * kSize);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_TRUE(region->direct_device_access()) << "the driver registered the region";
  const std::string data = testing::RandomBytes(kSize, 11);
  std::memcpy(region->data(), data.data(), kSize);
  absl::StatusOr<Buffer> buffer = session.Allocate(kSize);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(session.Write(*buffer, 0, RegionSlice{*region, 0, kSize}).ok());
  ASSERT_TRUE(session.Read(*buffer, 0, RegionSlice{*region, kSize, kSize}).ok());
  EXPECT_EQ(std::string(region->data() + kSize, kSize), data);
  EXPECT_EQ(session.Read(*buffer, 0, kSize).value_or(""), data);
}

TEST_F(GpuDoubleTest, DeviceErrorResetsTheContextAndNewWorkRuns) {
  Session faulting = Open("faulting");
  Session bystander = Open("bystander");
  absl::StatusOr<Buffer> out = faulting.Allocate(64);
  absl::StatusOr<Buffer> kept = bystander.Allocate(16);
  ASSERT_TRUE(out.ok() && kept.ok());
  ASSERT_TRUE(bystander.Write(*kept, 0, "bystander-bytes!").ok());

  absl::Status faulted = Fault(faulting, "fake_device_trap");
  EXPECT_EQ(faulted.code(), absl::StatusCode::kUnavailable) << faulted;
  EXPECT_THAT(std::string(faulted.message()), HasSubstr("illegal memory access"));
  absl::Status lost = faulting.Read(*out, 0, 64).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable) << lost;
  EXPECT_THAT(std::string(lost.message()), HasSubstr("was lost"));
  absl::Status told = bystander.Synchronize();
  EXPECT_EQ(told.code(), absl::StatusCode::kUnavailable) << told;
  EXPECT_THAT(std::string(told.message()), HasSubstr("device 0 was reset"));
  EXPECT_EQ(bystander.Read(*kept, 0, 16).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(kept->Free().ok()) << "a lost handle can still be freed";

  // New work, from old and new sessions, runs on the new context.
  Session newcomer = Open("newcomer");
  for (Session* session : {&bystander, &newcomer}) {
    absl::StatusOr<Buffer> fresh = session->Allocate(16);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    ASSERT_TRUE(session->Write(*fresh, 0, "fresh-bytes-here").ok());
    EXPECT_EQ(session->Read(*fresh, 0, 16).value_or(""), "fresh-bytes-here");
  }
  EXPECT_THAT(Get("/metrics"), HasSubstr("gpucmd_device_resets_total{device=\"0\"} 1"));
  EXPECT_THAT(Get("/metrics"), HasSubstr("gpucmd_device_ready{device=\"0\"} 1"));
}

TEST_F(GpuDoubleTest, AFaultThatOutlivesTheContextRestartsTheDaemonWhichServesAgain) {
  Session faulting = Open("faulting");
  absl::Status faulted = Fault(faulting, "fake_device_fatal_trap");
  EXPECT_EQ(faulted.code(), absl::StatusCode::kUnavailable) << faulted;
  EXPECT_THAT(std::string(faulted.message()), HasSubstr("illegal memory access"));

  // The daemon drains and exits for its service manager to start it again.
  EXPECT_EQ(daemon_->AwaitExit(), 75);
  EXPECT_THAT(daemon_->StderrText(), HasSubstr("device 0 is down"));
  EXPECT_THAT(daemon_->StderrText(), HasSubstr("a device was lost for good"));
  daemon_.reset();
  StartDaemon("");
  Session newcomer = Open("newcomer");
  absl::StatusOr<Buffer> fresh = newcomer.Allocate(16);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE(newcomer.Write(*fresh, 0, "fresh-bytes-here").ok());
  EXPECT_EQ(newcomer.Read(*fresh, 0, 16).value_or(""), "fresh-bytes-here");
}

TEST_F(GpuDoubleTest, KeepLostDevicesDownKeepsTheDaemonUpWithTheDeviceDown) {
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
  daemon_.reset();
  StartDaemon("keep_lost_devices_down: true\n");
  Session faulting = Open("faulting");
  EXPECT_EQ(Fault(faulting, "fake_device_fatal_trap").code(), absl::StatusCode::kUnavailable);

  // The daemon answers on; the device refuses work, saying why.
  absl::StatusOr<Session> newcomer = client_->OpenSession(0, "newcomer");
  absl::Status refused = newcomer.ok() ? newcomer->Allocate(16).status() : newcomer.status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("device 0 is down"));
  EXPECT_THAT(Get("/metrics"), HasSubstr("gpucmd_device_ready{device=\"0\"} 0"));
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace gpucmd
