// What counting a command for its client costs on the device's path (Note [Per-client
// metrics]): Metrics::RecordLaunches and RecordCopy, and the queue-wait observation each
// queued task makes, against a bare Prometheus counter increment measured in the same
// run. Every Batch command that succeeds pays one Record call. Last, what every finished
// RPC records.
//
//   bazel run -c opt //tests/bench:metrics_bench

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/core/metrics.h"

namespace gpucmd {
namespace {

// `count` client names, like those of a daemon's sessions (past 20, some count as
// "other").
std::vector<std::string> ClientNames(int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back(absl::StrCat("inference-worker-", i));
  return names;
}

// Baseline: what the per-device launch counter alone costs.
void BM_CounterIncrement(benchmark::State& state) {
  Metrics metrics(1);
  prometheus::Counter& counter = metrics.DeviceResets(0);
  for (auto _ : state) counter.Increment();
}
BENCHMARK(BM_CounterIncrement);

void BM_RecordLaunches(benchmark::State& state) {
  Metrics metrics(1);
  const std::vector<std::string> names = ClientNames(static_cast<int>(state.range(0)));
  size_t next = 0;
  for (auto _ : state) {
    metrics.RecordLaunches(0, names[next], 1);
    next = (next + 1) % names.size();
  }
}
BENCHMARK(BM_RecordLaunches)->Arg(8)->Arg(64)->ThreadRange(1, 2);

void BM_RecordCopy(benchmark::State& state) {
  Metrics metrics(1);
  const std::vector<std::string> names = ClientNames(8);
  size_t next = 0;
  for (auto _ : state) {
    metrics.RecordCopy(0, names[next], Metrics::Direction::kHostToDevice, 4096);
    next = (next + 1) % names.size();
  }
}
BENCHMARK(BM_RecordCopy);

// What DeviceWorker::Submit adds to a queued task: two clock reads and an observation.
void BM_QueueWaitObservation(benchmark::State& state) {
  Metrics metrics(1);
  for (auto _ : state) {
    const auto queued_at = std::chrono::steady_clock::now();
    metrics.QueueWait(0).Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - queued_at).count());
  }
}
BENCHMARK(BM_QueueWaitObservation);

// What every finished RPC records (Metrics::RecordRequest, from the metrics interceptor
// or the Submit reactor): its count by method and status code and its latency, over
// range(0) methods in turn.
void BM_RecordRequest(benchmark::State& state) {
  Metrics metrics(1);
  std::vector<Metrics::RequestSeries*> methods;
  for (int i = 0; i < state.range(0); ++i) {
    methods.push_back(&metrics.RequestsOf(absl::StrCat("gpucmd.v1.GpuCommand/Method", i)));
  }
  size_t next = 0;
  for (auto _ : state) {
    metrics.RecordRequest(*methods[next], absl::StatusCode::kOk, 0.0001);
    next = (next + 1) % methods.size();
  }
}
BENCHMARK(BM_RecordRequest)->Arg(1)->Arg(16)->ThreadRange(1, 2);

}  // namespace
}  // namespace gpucmd

BENCHMARK_MAIN();
