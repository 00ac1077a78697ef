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
      RecordFinishedCall(*metrics_, rpc_, methods->GetSendStatus(), start_);
    }
    methods->Proceed();
  }

 private:
  const std::string rpc_;
  Metrics* const metrics_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

void RecordFinishedCall(Metrics& metrics, absl::string_view rpc, const grpc::Status& status,
                        std::chrono::steady_clock::time_point started) {
  // gRPC and absl share the canonical code numbering.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  metrics.RecordRequest(
      rpc, absl::StatusCodeToString(code),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

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
