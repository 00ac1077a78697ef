#ifndef GPUCMDD_CLIENT_CTL_BENCH_H_
#define GPUCMDD_CLIENT_CTL_BENCH_H_

// `gpucmdctl bench`: what an operator runs to check a host. Against a running daemon,
// in one session of its own: round-trip latency (ListDevices, an idle Synchronize), the
// empty-kernel launch rate (unary, and in Submit batches of 64), and bandwidth of
// writes and reads, inline over gRPC and through a shared-memory region (Unix socket
// only). Each figure is measured for about `seconds`.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"

namespace gpucmd {

struct BenchOptions {
  uint64_t transfer_bytes = 16 << 20;
  std::chrono::duration<double> seconds{0.5};
};

struct BenchRow {
  std::string what;
  double value = 0;
  std::string unit;  // "us", "launches/s", "GB/s"
  // Why the figure could not be measured (the daemon's refusal, say); empty when it was.
  std::string not_measured;
};

// INVALID_ARGUMENT, naming the flag, for no bytes per transfer or seconds per figure that
// are not positive and finite.
absl::Status ValidateBenchOptions(const BenchOptions& options);

// Every row, each either measured or saying why not (a limit of the daemon's, say); the
// rows after a step that failed (the kernel's compile, the transfers' buffer) say that
// step's error. ValidateBenchOptions' error before anything runs; the error when no
// session opens.
absl::StatusOr<std::vector<BenchRow>> RunHostBench(Client& client, const BenchOptions& options);

// One table, or JSON for scripts (a row not measured has a null value and its reason in
// "not_measured").
std::string FormatBench(const std::vector<BenchRow>& rows, bool json);

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_CTL_BENCH_H_
