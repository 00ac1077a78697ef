#ifndef GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_
#define GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_

// A gRPC server interceptor that counts every RPC of every service (gpucmd, health,
// reflection) in Metrics: in flight while it runs, then by method and status code with
// its latency. One place, so no handler can forget it.

#include "grpcpp/support/server_interceptor.h"
#include "server/core/metrics.h"

namespace gpucmd {

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive the server the factory is installed in.
  explicit MetricsInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics* const metrics_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_METRICS_INTERCEPTOR_H_
