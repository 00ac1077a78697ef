#ifndef GPUCMDD_TESTS_BENCH_BENCH_SUPPORT_H_
#define GPUCMDD_TESTS_BENCH_BENCH_SUPPORT_H_

// What the benchmarks share: a gpucmdd child process with an open session, timing, the
// memcpy baseline, and the launch loops through the daemon (unary RPCs and Submit).

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "benchmark/benchmark.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "server/command/command_interface.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_census.h"

namespace gpucmd::bench {

using ::gpucmd::testing::ProcessUsage;
using ::gpucmd::testing::UsageOf;

inline constexpr int kMaxMessageBytes = 16 << 20;
// The kernel of the launch benchmarks: one int parameter, nothing done.
inline constexpr char kEmptyKernel[] = "extern \"C\" __global__ void empty(int n) {}\n";
// Launches per synchronize in the launch-rate benchmarks.
inline constexpr int kLaunchesPerSync = 64;

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The value below which `fraction` of `sorted` (not empty) lies.
inline double Percentile(const std::vector<double>& sorted, double fraction) {
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(fraction * sorted.size()))];
}

// Sets counters PREFIX_p25, PREFIX_p50 and PREFIX_p75: the quartiles of `ratios` (not
// empty; sorted here).
inline void ReportQuartiles(benchmark::State& state, const std::string& prefix,
                            std::vector<double>& ratios) {
  std::sort(ratios.begin(), ratios.end());
  for (auto [suffix, fraction] : {std::pair{"_p25", 0.25}, std::pair{"_p50", 0.5},
                                  std::pair{"_p75", 0.75}}) {
    state.counters[prefix + suffix] = Percentile(ratios, fraction);
  }
}

// Busy CPU seconds of the whole machine so far, all CPUs together, from /proc/stat's
// "cpu" line: user, nice, system, irq and softirq (not idle, iowait or steal, the time
// the hypervisor gave to others). 0 when it cannot be read.
inline double MachineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string label;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (!(stat >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq) ||
      label != "cpu") {
    return 0;
  }
  return static_cast<double>(user + nice + system + irq + softirq) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Writes `data` into `buffer` and waits until it landed: untimed setup that touches the
// buffer's pages for the first time (the CPU driver's device memory is host memory,
// faulted in on first write), as a GPU's allocated memory is resident. A write answers
// once queued: without the wait, its copy and faults ran inside the first timed
// transfer (a 256 MiB read row of copy_bench measured 65,000 faults a read, all of them
// its setup's).
inline void WriteUntimed(Session& session, const Buffer& buffer, const std::string& data) {
  (void)session.Write(buffer, 0, data);
  (void)session.Synchronize(0);
}

// The gpucmdd of the benchmark's runfiles, started with `config` (text-format lines) plus
// a quiet log and a 16 MiB message limit (with `limits`, more fields of the limits
// message), with one session open.
struct BenchDaemon {
  explicit BenchDaemon(const std::string& config, const std::string& limits = "") {
    std::string directory = testing::ShortTempDir();
    std::string path = directory + "/bench.textproto";
    std::ofstream(path) << config << "\nlog_level: \"warn\"\n"
                        << "limits { max_message_bytes: " << kMaxMessageBytes << " " << limits
                        << " }\n"
                        << "compile { cache_dir: \"" << directory << "/cache\" }\n";
    process.emplace(*testing::DaemonProcess::Start({"--listen=unix:" + directory + "/b.sock",
                                                    "--http_listen=127.0.0.1:0",
                                                    "--config=" + path}));
    ClientOptions options;
    options.max_message_bytes = kMaxMessageBytes;
    client = *Client::Connect(process->grpc_target(), options);
    session.emplace(*client->OpenSession(0, "bench"));
  }
  std::optional<testing::DaemonProcess> process;
  std::unique_ptr<Client> client;
  std::optional<Session> session;
};

// A BenchDaemon with kEmptyKernel compiled in its session.
struct EmptyKernelDaemon {
  EmptyKernelDaemon() : daemon("") {
    kernel = daemon.session->Compile(kEmptyKernel, "empty")->kernel_id();
  }
  BenchDaemon daemon;
  std::string kernel;
};

// A single-threaded memcpy of `size` bytes between buffers of its own, timed one copy at
// a time (e.g. beside each transfer of the same size).
class MemcpyAlongside {
 public:
  explicit MemcpyAlongside(size_t size) : source_(size, 1), target_(size) {
    std::memcpy(target_.data(), source_.data(), size);  // fault the pages in
  }
  // One memcpy's seconds.
  double Seconds() {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(target_.data(), source_.data(), source_.size());
    benchmark::ClobberMemory();
    return SecondsSince(start);
  }

 private:
  std::vector<char> source_, target_;
};

// Bytes per second of a single-threaded memcpy of `size` bytes, measured now (64 MiB
// copied in all, at least one copy).
inline double MemcpyBytesPerSecond(size_t size) {
  MemcpyAlongside memcpy_rounds(size);
  const int rounds = static_cast<int>(std::max<size_t>(1, (64 << 20) / size));
  double seconds = 0;
  for (int i = 0; i < rounds; ++i) seconds += memcpy_rounds.Seconds();
  return static_cast<double>(size) * rounds / seconds;
}

// Sets bytes/s and `x_memcpy`: this throughput divided by memcpy's, both measured now.
inline void ReportThroughput(benchmark::State& state, size_t size, double loop_seconds) {
  double total = static_cast<double>(state.iterations()) * static_cast<double>(size);
  state.SetBytesProcessed(static_cast<int64_t>(total));
  state.counters["x_memcpy"] = total / loop_seconds / MemcpyBytesPerSecond(size);
}

// kLaunchesPerSync launches of `launch` then a synchronize, on an in-process Command.
inline void LaunchBatchInProcess(CommandInterface& command, const KernelLaunch& launch) {
  constexpr SessionId kSession = 1;
  for (int i = 0; i < kLaunchesPerSync; ++i) {
    benchmark::DoNotOptimize(command.Launch(kSession, 0, launch));
  }
  benchmark::DoNotOptimize(WaitFor(command.Synchronize(kSession, 0)));
}

// LaunchBatchInProcess per iteration (the launch-rate baseline); returns launches per
// second.
inline double LaunchInProcess(benchmark::State& state, CommandInterface& command,
                              const KernelLaunch& launch) {
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) LaunchBatchInProcess(command, launch);
  double launches = static_cast<double>(state.iterations() * kLaunchesPerSync);
  state.SetItemsProcessed(static_cast<int64_t>(launches));
  return launches / SecondsSince(start);
}

// kLaunchesPerSync unary Launch RPCs of a one-int-argument kernel, then a Synchronize,
// per iteration; returns the loop's seconds.
inline double LaunchThroughUnaryRpcs(benchmark::State& state, Session& session,
                                     const std::string& kernel) {
  LaunchShape shape{MakeDim3(1), MakeDim3(1)};
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (int i = 0; i < kLaunchesPerSync; ++i) {
      benchmark::DoNotOptimize(session.Launch(kernel, shape, {Int32Argument(0)}));
    }
    benchmark::DoNotOptimize(session.Synchronize());
  }
  return SecondsSince(start);
}

// A batch of kLaunchesPerSync launches of a one-int-argument kernel and a synchronize.
inline v1::SubmitRequest EmptyLaunchBatch(const Session& session, const std::string& kernel) {
  v1::SubmitRequest batch;
  for (int i = 0; i <= kLaunchesPerSync; ++i) {
    v1::Command* command = batch.add_commands();
    command->set_sequence(i);
    if (i == kLaunchesPerSync) {
      command->mutable_synchronize()->set_session(session.token());
      continue;
    }
    v1::LaunchRequest* launch = command->mutable_launch();
    launch->set_session(session.token());
    launch->set_kernel_id(kernel);
    *launch->mutable_grid() = MakeDim3(1);
    *launch->mutable_block() = MakeDim3(1);
    *launch->add_args() = Int32Argument(0);
  }
  return batch;
}

// A Submit call that sends one batch again and again and reads its answers.
class RepeatedBatches {
 public:
  RepeatedBatches(Client& client, v1::SubmitRequest batch)
      : stream_(client.stub().Submit(&context_)), batch_(std::move(batch)) {}
  ~RepeatedBatches() {
    stream_->WritesDone();
    (void)stream_->Finish();
  }

  void Send() { stream_->Write(batch_); }
  // The next batch's answer; null once the call ended.
  const v1::SubmitResponse* Receive() { return stream_->Read(&replies_) ? &replies_ : nullptr; }
  // `count` batches with up to `in_flight` sent before their answers are read; returns
  // once every answer came.
  void Run(int count, int in_flight) {
    const int ahead = std::min(count, in_flight) - 1;
    for (int i = 0; i < ahead; ++i) Send();
    for (int i = ahead; i < count; ++i) {
      Send();
      Receive();
    }
    for (int i = 0; i < ahead; ++i) Receive();
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SubmitRequest, v1::SubmitResponse>> stream_;
  const v1::SubmitRequest batch_;
  v1::SubmitResponse replies_;
};

// One message sent and one answer received per iteration, with `in_flight` messages sent
// before their answers are read (1: one round trip each); returns the loop's seconds.
template <typename Send, typename Receive>
double PipelinedSeconds(benchmark::State& state, int in_flight, Send send, Receive receive) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 1; i < in_flight; ++i) send();
  for (auto _ : state) {
    send();
    receive();
  }
  for (int i = 1; i < in_flight; ++i) receive();
  return SecondsSince(start);
}

// One EmptyLaunchBatch per iteration, `in_flight` batches at a time (PipelinedSeconds);
// returns the loop's seconds, before the call is closed.
inline double LaunchThroughSubmit(benchmark::State& state, Client& client, Session& session,
                                  const std::string& kernel, int in_flight = 1) {
  RepeatedBatches batches(client, EmptyLaunchBatch(session, kernel));
  return PipelinedSeconds(
      state, in_flight, [&batches] { batches.Send(); }, [&batches] { batches.Receive(); });
}

// CPU time per launch over a launch benchmark's loop, from its construction to Report:
// `cpu_us_per_launch` of this process (the caller, its client's threads, an in-process
// device's stream workers) and, given the daemon's pid, `daemon_cpu_us_per_launch` of
// gpucmdd. The kernel executor, a child process of either, is in neither; the whole
// machine's busy CPU is (`machine_cpu_us_per_launch`, and `machine_busy_cpus`, that CPU
// over the loop's wall time): on a machine with few CPUs, a path that needs more of them
// per launch than they have is bound by them, however its work overlaps.
class LaunchCpuMeter {
 public:
  explicit LaunchCpuMeter(pid_t daemon = -1)
      : daemon_(daemon),
        own_start_(UsageOf(getpid())),
        daemon_start_(daemon > 0 ? UsageOf(daemon) : ProcessUsage{}),
        machine_busy_start_(MachineBusySeconds()),
        start_(std::chrono::steady_clock::now()) {}

  void Report(benchmark::State& state) const {
    const double launches =
        static_cast<double>(std::max<int64_t>(1, state.iterations() * kLaunchesPerSync));
    state.counters["cpu_us_per_launch"] =
        (UsageOf(getpid()).cpu_seconds - own_start_.cpu_seconds) * 1e6 / launches;
    if (daemon_ > 0) {
      state.counters["daemon_cpu_us_per_launch"] =
          (UsageOf(daemon_).cpu_seconds - daemon_start_.cpu_seconds) * 1e6 / launches;
    }
    const double machine_busy = MachineBusySeconds() - machine_busy_start_;
    state.counters["machine_cpu_us_per_launch"] = machine_busy * 1e6 / launches;
    state.counters["machine_busy_cpus"] = machine_busy / SecondsSince(start_);
  }

 private:
  pid_t daemon_;
  ProcessUsage own_start_;
  ProcessUsage daemon_start_;
  double machine_busy_start_;
  std::chrono::steady_clock::time_point start_;
};

// Items/s of a launch benchmark and `x_in_process`: its rate over `baseline_per_second`.
inline void ReportLaunchRate(benchmark::State& state, double seconds,
                             double baseline_per_second) {
  double launches = static_cast<double>(state.iterations() * kLaunchesPerSync);
  state.SetItemsProcessed(static_cast<int64_t>(launches));
  if (baseline_per_second > 0) {
    state.counters["x_in_process"] = launches / seconds / baseline_per_second;
  }
}

}  // namespace gpucmd::bench

#endif  // GPUCMDD_TESTS_BENCH_BENCH_SUPPORT_H_
