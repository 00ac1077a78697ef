// A bare gRPC unary echo in a process of its own: what a round trip between two
// processes costs in gRPC itself, the baseline of the daemon's unary calls (a daemon is
// always another process). Serves grpc.health.v1.Health/Check on gRPC's callback API
// (the one the daemon serves on) over the Unix socket named by its argument, and exits
// when its standard input closes, so it never outlives the benchmark that started it.
//
//   raw_echo_server /tmp/dir/echo.sock < pipe
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "base/lock_order_checks.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace {

class CallbackHealth final : public grpc::health::v1::Health::CallbackService {
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest*,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SOCKET_PATH < pipe\n", argv[0]);
    return 2;
  }
  gpucmd::StopAbseilLockOrderChecks();  // as the daemon does
  CallbackHealth service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("unix:") + argv[1], grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  server->Shutdown();
  return 0;
}
