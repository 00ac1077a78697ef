#include "tests/testing/raw_call.h"

#include <chrono>

#include "grpcpp/generic/generic_stub.h"

namespace gpucmd::testing {

grpc::Status CallWithRawBody(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& method, const std::string& body) {
  return CallWithRawBodies(channel, method, {body});
}

grpc::Status CallWithRawBodies(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& method,
                               const std::vector<std::string>& bodies) {
  grpc::CompletionQueue queue;
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &queue);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(nullptr);
  queue.Next(&tag, &ok);
  for (const std::string& body : bodies) {
    grpc::Slice slice(body);
    call->Write(grpc::ByteBuffer(&slice, 1), nullptr);
    queue.Next(&tag, &ok);
  }
  call->WritesDone(nullptr);
  queue.Next(&tag, &ok);
  grpc::ByteBuffer reply;
  do {
    call->Read(&reply, nullptr);
    queue.Next(&tag, &ok);
  } while (ok);
  grpc::Status status;
  call->Finish(&status, nullptr);
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

}  // namespace gpucmd::testing
