// A bare gRPC unary echo and bytes service in a process of its own: what a round trip
// and a transfer between two processes cost in gRPC itself, the baselines of the daemon's
// unary calls and inline copies (a daemon is always another process). Serves
// grpc.health.v1.Health/Check and gpucmd.bench.RawBytes on gRPC's callback API (the one
// the daemon serves on) over the Unix socket named by its argument, and exits
// when its standard input closes, so it never outlives the benchmark that started it.
//
//   raw_echo_server /tmp/dir/echo.sock < pipe
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/lock_order_checks.h"
#include "gpucmd/bench/raw_bytes.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace {

// The benchmarks' message limit (bench::kMaxMessageBytes in tests/bench/bench_support.h,
// which this process does not link): chunks of the client library's size fit.
constexpr int kMaxMessageBytes = 16 << 20;

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

// Download on the callback API: the requested bytes, in chunks of the requested size, the
// last with the status.
class DownloadReactor final : public grpc::ServerWriteReactor<gpucmd::bench::Chunk> {
 public:
  explicit DownloadReactor(const gpucmd::bench::DownloadRequest& request)
      : source_(request.size_bytes(), 'd'), chunk_bytes_(request.chunk_bytes()) {
    if (chunk_bytes_ == 0) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "chunk_bytes is 0"));
      return;
    }
    WriteNextChunk();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped reading"));
      return;
    }
    WriteNextChunk();
  }
  void OnDone() override { delete this; }

 private:
  void WriteNextChunk() {
    const size_t size = std::min<size_t>(chunk_bytes_, source_.size() - sent_);
    chunk_.set_data(source_.data() + sent_, size);
    sent_ += size;
    if (sent_ == source_.size()) {
      StartWriteAndFinish(&chunk_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&chunk_);
    }
  }

  const std::string source_;
  const size_t chunk_bytes_;
  size_t sent_ = 0;
  gpucmd::bench::Chunk chunk_;
};

// Upload on the callback API: counts the bytes received.
class UploadReactor final : public grpc::ServerReadReactor<gpucmd::bench::Chunk> {
 public:
  explicit UploadReactor(gpucmd::bench::UploadResponse* response) : response_(response) {
    StartRead(&chunk_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      response_->set_received_bytes(received_);
      Finish(grpc::Status::OK);
      return;
    }
    received_ += chunk_.data().size();
    StartRead(&chunk_);
  }
  void OnDone() override { delete this; }

 private:
  gpucmd::bench::UploadResponse* const response_;
  gpucmd::bench::Chunk chunk_;
  uint64_t received_ = 0;
};

// Exchange on the callback API: each chunk read is owed a reply of its reply_bytes,
// written in order while reading goes on; the call ends once the client is done sending
// and every reply is written. As the daemon's Submit reactor does, it decides under its
// lock and calls gRPC outside it.
class ExchangeReactor final : public grpc::ServerBidiReactor<gpucmd::bench::Chunk,
                                                               gpucmd::bench::Chunk> {
 public:
  ExchangeReactor() { StartRead(&incoming_); }
  void OnReadDone(bool ok) override {
    const uint64_t reply_bytes = incoming_.reply_bytes();
    if (ok) StartRead(&incoming_);  // reads are one at a time: `incoming_` is free again
    std::unique_lock lock(mutex_);
    if (ok) {
      owed_.push_back(reply_bytes);
    } else {
      reads_done_ = true;
    }
    Advance(lock);
  }
  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mutex_);
    writing_ = false;
    if (!ok) owed_.clear();  // the client is gone: its reads end the call
    Advance(lock);
  }
  void OnDone() override { delete this; }

 private:
  // Starts the next reply, or ends the call, when either is due; unlocks `lock` first.
  void Advance(std::unique_lock<std::mutex>& lock) {
    std::optional<uint64_t> reply;
    bool finish = false;
    if (!writing_ && !owed_.empty()) {
      writing_ = true;
      reply = owed_.front();
      owed_.pop_front();
    } else if (!writing_ && reads_done_ && !finished_) {
      finished_ = finish = true;
    }
    lock.unlock();
    if (reply) {
      outgoing_.mutable_data()->assign(*reply, 'r');  // only the one writer touches it
      StartWrite(&outgoing_);
    }
    if (finish) Finish(grpc::Status::OK);
  }

  gpucmd::bench::Chunk incoming_;
  gpucmd::bench::Chunk outgoing_;
  std::mutex mutex_;
  std::deque<uint64_t> owed_;  // guarded by mutex_, as are the flags
  bool writing_ = false;
  bool reads_done_ = false;
  bool finished_ = false;
};

class CallbackRawBytes final : public gpucmd::bench::RawBytes::CallbackService {
  grpc::ServerReadReactor<gpucmd::bench::Chunk>* Upload(
      grpc::CallbackServerContext*, gpucmd::bench::UploadResponse* response) override {
    return new UploadReactor(response);
  }
  grpc::ServerWriteReactor<gpucmd::bench::Chunk>* Download(
      grpc::CallbackServerContext*, const gpucmd::bench::DownloadRequest* request) override {
    return new DownloadReactor(*request);
  }
  grpc::ServerBidiReactor<gpucmd::bench::Chunk, gpucmd::bench::Chunk>* Exchange(
      grpc::CallbackServerContext*) override {
    return new ExchangeReactor();
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
  CallbackRawBytes bytes;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("unix:") + argv[1], grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(&service);
  builder.RegisterService(&bytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  server->Shutdown();
  return 0;
}
