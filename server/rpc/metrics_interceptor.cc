#include "server/rpc/metrics_interceptor.h"

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"

namespace gpucmd {
namespace {

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(Metrics::RequestSeries& series, Metrics* metrics)
      : series_(series), metrics_(metrics) {
    metrics_->RpcStarted();
  }
  ~MetricsInterceptor() override { metrics_->RpcEnded(); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      RecordFinishedCall(*metrics_, series_, methods->GetSendStatus(), start_);
    }
    methods->Proceed();
  }

 private:
  Metrics::RequestSeries& series_;
  Metrics* const metrics_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

std::vector<std::string> ServedMethods() {
  // gRPC's health service is not described in protobuf's pool.
  std::vector<std::string> methods = {"grpc.health.v1.Health/Check", "grpc.health.v1.Health/Watch"};
  for (const std::string& name : {std::string(v1::GpuCommand::service_full_name()),
                                  std::string("grpc.reflection.v1alpha.ServerReflection")}) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    if (service == nullptr) continue;  // reflection, where it is not linked in
    for (int i = 0; i < service->method_count(); ++i) {
      methods.push_back(absl::StrCat(service->full_name(), "/", service->method(i)->name()));
    }
  }
  return methods;
}

void RecordFinishedCall(Metrics& metrics, Metrics::RequestSeries& series,
                        const grpc::Status& status, std::chrono::steady_clock::time_point started) {
  // gRPC and absl share the canonical code numbering.
  metrics.RecordRequest(
      series, static_cast<absl::StatusCode>(status.error_code()),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

MetricsInterceptorFactory::MetricsInterceptorFactory(
    Metrics* metrics, const std::vector<std::string>& served,
    const std::vector<std::string>& counted_by_handler)
    : metrics_(metrics),
      other_(&metrics->RequestsOf("other")),
      counted_by_handler_(counted_by_handler.begin(), counted_by_handler.end()) {
  for (const std::string& method : served) served_[method] = &metrics->RequestsOf(method);
}

grpc::experimental::Interceptor* MetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const char* method = info->method();  // "/package.Service/Method"
  absl::string_view rpc = method != nullptr ? method : "";
  if (!rpc.empty() && rpc.front() == '/') rpc.remove_prefix(1);
  if (counted_by_handler_.contains(rpc)) return nullptr;
  auto served = served_.find(rpc);
  return new MetricsInterceptor(served != served_.end() ? *served->second : *other_, metrics_);
}

}  // namespace gpucmd
