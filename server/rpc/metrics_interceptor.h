#ifndef GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_
#define GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_

// A gRPC server interceptor that counts every RPC of every service (gpucmd, health,
// reflection) in Metrics: in flight while it runs, then by method and status code with
// its latency. One place, so no handler can forget it; the exceptions are the streams
// whose handlers count themselves the same way (Metrics::RpcStarted, RecordFinishedCall,
// Metrics::RpcEnded), because an interceptor is run on every message of its call:
// Submit's batch stream, the throughput path, spent some 4% of the daemon's CPU in it.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"
#include "server/core/metrics.h"

namespace gpucmd {

// Counts a call of `rpc` ("package.Service/Method") that started at `started` and ends
// with `status` (Metrics::RecordRequest): what the interceptor records of every call it
// sees, and what the handlers that count themselves record as they finish.
void RecordFinishedCall(Metrics& metrics, absl::string_view rpc, const grpc::Status& status,
                        std::chrono::steady_clock::time_point started);

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive the server the factory is installed in. `counted_by_handler`:
  // the full names ("package.Service/Method") of the methods left to their handlers.
  MetricsInterceptorFactory(Metrics* metrics, std::vector<std::string> counted_by_handler)
      : metrics_(metrics), counted_by_handler_(std::move(counted_by_handler)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics* const metrics_;
  const std::vector<std::string> counted_by_handler_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_
