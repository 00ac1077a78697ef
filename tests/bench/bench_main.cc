// main() of the benchmarks that talk gRPC: the daemon stops abseil's lock-order checks
// at start (base/lock_order_checks.h), so this process, its clients and the bare gRPC
// servers it measures as baselines run with them stopped too: both sides of a ratio pay
// the same for gRPC's locks.
#include "base/lock_order_checks.h"
#include "benchmark/benchmark.h"

int main(int argc, char** argv) {
  gpucmd::StopAbseilLockOrderChecks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
