#ifndef GPUCMDD_SERVER_RPC_UNPARSED_REQUEST_INTERCEPTOR_H_
#define GPUCMDD_SERVER_RPC_UNPARSED_REQUEST_INTERCEPTOR_H_

// A gRPC server interceptor that answers a unary or server-streaming call whose request
// did not parse INVALID_ARGUMENT saying so, where gRPC would answer UNIMPLEMENTED with no
// message (Note [Requests that do not parse] in server/rpc/raw_messages.h). Calls of
// every service pass through it; streams that read many messages are left alone.

#include "grpcpp/support/server_interceptor.h"

namespace gpucmd {

class UnparsedRequestInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_UNPARSED_REQUEST_INTERCEPTOR_H_
