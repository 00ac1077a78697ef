#ifndef GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_
#define GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_

// A gRPC server interceptor that counts every RPC of every service (gpucmd, health,
// reflection) in Metrics: in flight while it runs, then by method and status code with
// its latency. One place, so no handler can forget it; the exceptions are the streams
// whose handlers count themselves the same way (Metrics::RpcStarted, RecordFinishedCall,
// Metrics::RpcEnded), because an interceptor is run on every message of its call:
// Submit's batch stream, the throughput path, spent some 4% of the daemon's CPU in it.
//
// A call names its method itself, and gRPC makes an interceptor for a name no service
// serves too (it then answers UNIMPLEMENTED). Such calls all count under the method
// "other": a client calling made-up names must not make series without end (20,000 such
// calls took the daemon from 25 to 49 MB and /metrics to 37 MB when each got its own).

#include <chrono>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"
#include "server/core/metrics.h"

namespace gpucmd {

// The full names ("package.Service/Method") of the methods the daemon serves: those of
// its GpuCommand service and of gRPC's reflection service, from their descriptors, and
// gRPC's health service's Check and Watch.
std::vector<std::string> ServedMethods();

// Counts a call of `series`' method that started at `started` and ends with `status`
// (Metrics::RecordRequest): what the interceptor records of every call it sees, and what
// the handlers that count themselves record as they finish.
void RecordFinishedCall(Metrics& metrics, Metrics::RequestSeries& series,
                        const grpc::Status& status, std::chrono::steady_clock::time_point started);

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive the server the factory is installed in. `served`: the full
  // names of the methods counted under their own names (ServedMethods); calls of any
  // other name count as "other". `counted_by_handler`: those left to their handlers.
  MetricsInterceptorFactory(Metrics* metrics, const std::vector<std::string>& served,
                            const std::vector<std::string>& counted_by_handler);
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics* const metrics_;
  // Fixed at construction: looked up by every call without a lock.
  absl::flat_hash_map<std::string, Metrics::RequestSeries*> served_;
  Metrics::RequestSeries* const other_;
  const absl::flat_hash_set<std::string> counted_by_handler_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_
