#include "server/rpc/unparsed_request_interceptor.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/raw_messages.h"

namespace gpucmd {
namespace {

using grpc::experimental::InterceptionHookPoints;

class UnparsedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit UnparsedRequestInterceptor(std::string method) : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // A call with one request message that received none got one that did not parse.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      unparsed_ = true;
    }
    if (unparsed_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->ModifySendStatus(
          ToGrpcStatus(UnparsedRequest(absl::StrCat("not a request of ", method_))));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool unparsed_ = false;
};

}  // namespace

grpc::experimental::Interceptor* UnparsedRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) return nullptr;
  std::string method = info->method();  // "/package.Service/Method"
  if (!method.empty() && method.front() == '/') method.erase(0, 1);
  return new UnparsedRequestInterceptor(std::move(method));
}

}  // namespace gpucmd
