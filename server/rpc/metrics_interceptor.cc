#include "server/rpc/metrics_interceptor.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace gpucmd {
namespace {

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(std::string rpc, Metrics* metrics)
      : rpc_(std::move(rpc)), metrics_(metrics) {
    metrics_->RpcStarted();
  }
  ~MetricsInterceptor() override { metrics_->RpcEnded(); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      // gRPC and absl share the canonical code numbering.
      auto code = static_cast<absl::StatusCode>(methods->GetSendStatus().error_code());
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_->RecordRequest(rpc_, absl::StatusCodeToString(code), seconds);
    }
    methods->Proceed();
  }

 private:
  const std::string rpc_;
  Metrics* const metrics_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

grpc::experimental::Interceptor* MetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  std::string rpc = info->method();  // "/package.Service/Method"
  if (!rpc.empty() && rpc.front() == '/') rpc.erase(0, 1);
  if (std::find(counted_by_handler_.begin(), counted_by_handler_.end(), rpc) !=
      counted_by_handler_.end()) {
    return nullptr;
  }
  return new MetricsInterceptor(std::move(rpc), metrics_);
}

}  // namespace gpucmd
