#include "tests/testing/raw_call.h"

#include <chrono>

#include "grpcpp/generic/generic_stub.h"

namespace gpucmd::testing {

grpc::Status CallWithRawBody(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& method, const std::string& body,
                             std::vector<std::string>* replies) {
  return CallWithRawBodies(channel, method, {body}, replies);
}

grpc::Status CallWithRawBodies(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& method,
                               const std::vector<std::string>& bodies,
                               std::vector<std::string>* replies) {
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
  while (true) {
    grpc::ByteBuffer reply;
    call->Read(&reply, nullptr);
    queue.Next(&tag, &ok);
    if (!ok) break;
    if (replies == nullptr) continue;
    std::vector<grpc::Slice> slices;
    (void)reply.Dump(&slices);
    std::string& bytes = replies->emplace_back();
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  grpc::Status status;
  call->Finish(&status, nullptr);
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

}  // namespace gpucmd::testing
