// Write and read throughput, in-process (Command<CpuDriver>) and through the daemon
// over its Unix socket (inline bytes, and from/into a shared-memory region), each also
// reported as a ratio of a single-threaded memcpy of the same size measured in the same
// run (counter `x_memcpy`; shared memory: `x_memcpy_p50`, from a memcpy beside each
// transfer); inline bytes also against a bare gRPC bytes service on the same kind of
// socket (`x_raw_grpc`: a client-streaming upload and a server-streaming download in
// chunks of the client library's size, served in this process; and `x_raw_grpc_process`:
// the same on the callback API in a process of its own, raw_echo_server; each warmed by
// one untimed transfer each way); minor page faults per transfer in the daemon
// (`daemon_faults`) and in this process (`client_faults`); allocate/free rates; inline
// writes and reads in Submit batches against the same uploads and downloads; small inline
// transfers alternating with the bare service's in chunks (`x_raw_grpc_process_p25`,
// `_p50`, `_p75`).
//
//   bazel run -c opt //tests/bench:copy_bench -- --benchmark_min_time=0.2

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "benchmark/benchmark.h"
#include "client/client.h"
#include "driver/cpu/cpu_driver.h"
#include "gpucmd/bench/raw_bytes.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/command/command.h"
#include "tests/bench/bench_support.h"
#include "tests/bench/echo_baseline.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd {
namespace {

constexpr uint64_t kDeviceBytes = uint64_t{2} << 30;
constexpr SessionId kSession = 1;

using bench::BenchDaemon;
using bench::ReportThroughput;
using bench::SecondsSince;

void BM_Memcpy(benchmark::State& state) {
  size_t size = state.range(0);
  std::vector<char> source(size, 1), target(size);
  for (auto _ : state) {
    std::memcpy(target.data(), source.data(), size);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// In-process: one Command on a CPU backend, driven from the benchmark thread as the
// device thread would.
struct InProcess {
  InProcess()
      : backend(*CpuBackend::Create({.capacity_bytes = kDeviceBytes, .stream_count = 4})),
        command(std::make_unique<Command<CpuDriver>>(*backend, CommandOptions())) {}
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<Command<CpuDriver>> command;
};

void BM_CommandWrite(benchmark::State& state) {
  size_t size = state.range(0);
  InProcess device;
  BufferId id = *device.command->Allocate(kSession, size);
  std::string data(size, 'w');
  (void)device.command->Write(kSession, 0, id, CopyLayout::Contiguous(0, size), data);
  (void)WaitFor(device.command->Synchronize(kSession, 0));  // untimed first touch
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    // The command takes ownership of the payload, as a request's bytes are handed over.
    state.PauseTiming();
    std::string payload = data;
    state.ResumeTiming();
    benchmark::DoNotOptimize(device.command->Write(kSession, 0, id,
                                                   CopyLayout::Contiguous(0, size),
                                                   std::move(payload)));
    benchmark::DoNotOptimize(WaitFor(device.command->Synchronize(kSession, 0)));
  }
  ReportThroughput(state, size, SecondsSince(start));
}

void BM_CommandRead(benchmark::State& state) {
  size_t size = state.range(0);
  InProcess device;
  BufferId id = *device.command->Allocate(kSession, size);
  (void)device.command->Write(kSession, 0, id, CopyLayout::Contiguous(0, size),
                              std::string(size, 'r'));
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    absl::StatusOr<PendingRead> read =
        device.command->Read(kSession, 0, id, CopyLayout::Contiguous(0, size));
    benchmark::DoNotOptimize(read->wait());
  }
  ReportThroughput(state, size, SecondsSince(start));
}

// An Allocate that finds the device full of freed buffers whose clearing has not run yet
// waits for it, as the device worker's does (Note [Out of device memory] in
// server/command/command.h).
void BM_CommandAllocateFree(benchmark::State& state) {
  InProcess device;
  for (auto _ : state) {
    absl::StatusOr<BufferId> id = device.command->Allocate(kSession, state.range(0));
    if (!id.ok()) {
      (void)WaitFor(device.command->MemoryBeingFreed(state.range(0)).wait);
      id = device.command->Allocate(kSession, state.range(0));
    }
    benchmark::DoNotOptimize(device.command->Free(kSession, *id));
  }
  state.SetItemsProcessed(state.iterations());
}

// Counts minor page faults over a benchmark's timed loop, per iteration.
class FaultCounter {
 public:
  explicit FaultCounter(pid_t daemon) : daemon_(daemon) { Restart(); }
  void Restart() {
    daemon_start_ = daemon_ > 0 ? bench::UsageOf(daemon_).minor_faults : 0;
    own_start_ = bench::UsageOf(getpid()).minor_faults;
  }
  void Report(benchmark::State& state) const {
    const double iterations = static_cast<double>(std::max<int64_t>(1, state.iterations()));
    if (daemon_ > 0) {
      state.counters["daemon_faults"] =
          static_cast<double>(bench::UsageOf(daemon_).minor_faults - daemon_start_) / iterations;
    }
    state.counters["client_faults"] =
        static_cast<double>(bench::UsageOf(getpid()).minor_faults - own_start_) / iterations;
  }

 private:
  pid_t daemon_;
  uint64_t daemon_start_ = 0;
  uint64_t own_start_ = 0;
};

// The bare bytes service: what gRPC itself costs to move bytes.
class RawBytesService final : public bench::RawBytes::Service {
 public:
  grpc::Status Upload(grpc::ServerContext*, grpc::ServerReader<bench::Chunk>* reader,
                      bench::UploadResponse* response) override {
    bench::Chunk chunk;
    uint64_t received = 0;
    while (reader->Read(&chunk)) received += chunk.data().size();
    response->set_received_bytes(received);
    return grpc::Status::OK;
  }
  grpc::Status Download(grpc::ServerContext*, const bench::DownloadRequest* request,
                        grpc::ServerWriter<bench::Chunk>* writer) override {
    if (request->chunk_bytes() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "chunk_bytes is 0");
    }
    std::string source(request->size_bytes(), 'd');
    bench::Chunk chunk;
    for (uint64_t sent = 0; sent < source.size(); sent += request->chunk_bytes()) {
      chunk.set_data(source.data() + sent, std::min(request->chunk_bytes(), source.size() - sent));
      if (!writer->Write(chunk)) break;
    }
    return grpc::Status::OK;
  }
};

// One bare server for the run, on a Unix socket, with the daemon's message limit.
struct RawBytesServer {
  RawBytesServer() {
    const std::string target = "unix:" + testing::ShortTempDir() + "/raw.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort(target, grpc::InsecureServerCredentials());
    builder.SetMaxReceiveMessageSize(bench::kMaxMessageBytes);
    builder.SetMaxSendMessageSize(bench::kMaxMessageBytes);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(bench::kMaxMessageBytes);
    arguments.SetMaxSendMessageSize(bench::kMaxMessageBytes);
    stub = bench::RawBytes::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments));
  }
  ~RawBytesServer() { server->Shutdown(); }
  RawBytesService service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<bench::RawBytes::Stub> stub;
};

RawBytesServer& SharedRawServer() {
  static RawBytesServer server;
  return server;
}

// The client library's chunk: the message limit less room for the other fields.
constexpr size_t kChunkBytes = bench::kMaxMessageBytes - 1024;

// Raw throughput of this run by size, set by the raw benchmarks (registered first).
std::map<int64_t, double> raw_upload_bytes_per_second;
std::map<int64_t, double> raw_download_bytes_per_second;
std::map<int64_t, double> raw_process_upload_bytes_per_second;
std::map<int64_t, double> raw_process_download_bytes_per_second;

// Sets `counter` to `bytes_per_second` over `raw`'s throughput of the same size, when
// that was measured in this run.
void ReportAgainst(benchmark::State& state, double bytes_per_second,
                   const std::map<int64_t, double>& raw, const std::string& counter) {
  auto found = raw.find(state.range(0));
  if (found == raw.end() || found->second <= 0) return;
  state.counters[counter] = bytes_per_second / found->second;
}

// This benchmark's throughput over the bare service's in this process (`x_raw_grpc`) and
// in its own (`x_raw_grpc_process`).
void ReportAgainstRaw(benchmark::State& state, double loop_seconds,
                      const std::map<int64_t, double>& raw,
                      const std::map<int64_t, double>& raw_process) {
  if (loop_seconds <= 0) return;
  const double bytes_per_second = static_cast<double>(state.iterations()) *
                                  static_cast<double>(state.range(0)) / loop_seconds;
  ReportAgainst(state, bytes_per_second, raw, "x_raw_grpc");
  ReportAgainst(state, bytes_per_second, raw_process, "x_raw_grpc_process");
}

// Uploads `data` through `stub` once, in the client library's chunks.
void UploadOnce(bench::RawBytes::Stub& stub, const std::string& data) {
  grpc::ClientContext context;
  bench::UploadResponse response;
  auto writer = stub.Upload(&context, &response);
  bench::Chunk chunk;
  // The last chunk carries the end of the stream, as the client library sends it.
  for (size_t sent = 0;; sent += kChunkBytes) {
    chunk.set_data(data.data() + sent, std::min(kChunkBytes, data.size() - sent));
    if (sent + kChunkBytes >= data.size()) {
      writer->WriteLast(chunk, grpc::WriteOptions());
      break;
    }
    if (!writer->Write(chunk)) {
      writer->WritesDone();
      break;
    }
  }
  benchmark::DoNotOptimize(writer->Finish());
}

// Downloads `size` bytes through `stub` once, in the client library's chunks.
void DownloadOnce(bench::RawBytes::Stub& stub, size_t size) {
  bench::DownloadRequest request;
  request.set_size_bytes(size);
  request.set_chunk_bytes(kChunkBytes);
  grpc::ClientContext context;
  auto reader = stub.Download(&context, request);
  std::string received;
  received.reserve(size);
  bench::Chunk chunk;
  while (reader->Read(&chunk)) received.append(chunk.data());
  benchmark::DoNotOptimize(reader->Finish());
  benchmark::DoNotOptimize(received);
}

// One untimed upload and download of `size` bytes through `stub`. A channel's HTTP/2
// windows grow with the traffic it carried: a fresh one downloaded 1 MiB at 70-80 MB/s,
// and at 1.6-2.3 GB/s once it had carried an upload, as the daemon's channel has by the
// time its rows run (each writes its buffer first).
void WarmRawChannel(bench::RawBytes::Stub& stub, size_t size) {
  UploadOnce(stub, std::string(size, 'u'));
  DownloadOnce(stub, size);
}

// `transfer` once per iteration, of `state.range(0)` bytes through `stub`, its channel
// warmed first. Returns the bytes per second.
double MeasureRawTransfer(benchmark::State& state, bench::RawBytes::Stub& stub,
                          const std::function<void()>& transfer) {
  const size_t size = state.range(0);
  WarmRawChannel(stub, size);
  FaultCounter faults(0);
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) transfer();
  const double seconds = SecondsSince(start);
  faults.Report(state);
  ReportThroughput(state, size, seconds);
  return static_cast<double>(state.iterations()) * static_cast<double>(size) / seconds;
}

double MeasureRawUpload(benchmark::State& state, bench::RawBytes::Stub& stub) {
  const std::string data(state.range(0), 'u');
  return MeasureRawTransfer(state, stub, [&] { UploadOnce(stub, data); });
}

double MeasureRawDownload(benchmark::State& state, bench::RawBytes::Stub& stub) {
  const size_t size = state.range(0);
  return MeasureRawTransfer(state, stub, [&] { DownloadOnce(stub, size); });
}

void BM_RawGrpcUpload(benchmark::State& state) {
  raw_upload_bytes_per_second[state.range(0)] =
      MeasureRawUpload(state, *SharedRawServer().stub);
}

void BM_RawGrpcDownload(benchmark::State& state) {
  raw_download_bytes_per_second[state.range(0)] =
      MeasureRawDownload(state, *SharedRawServer().stub);
}

// The same bare service in a process of its own, on gRPC's callback API
// (raw_echo_server): the daemon's kind of server. Reported against the in-process rows
// above (`x_raw_grpc`).
bench::RawBytes::Stub& OtherProcessRawBytes() {
  static std::unique_ptr<bench::RawBytes::Stub> stub = [] {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(bench::kMaxMessageBytes);
    arguments.SetMaxSendMessageSize(bench::kMaxMessageBytes);
    return bench::RawBytes::NewStub(grpc::CreateCustomChannel(
        "unix:" + bench::SharedEcho().socket, grpc::InsecureChannelCredentials(), arguments));
  }();
  return *stub;
}

void BM_RawGrpcUploadOtherProcess(benchmark::State& state) {
  if (!bench::SharedEcho().ready) return state.SkipWithError("raw_echo_server did not start");
  const double rate = MeasureRawUpload(state, OtherProcessRawBytes());
  raw_process_upload_bytes_per_second[state.range(0)] = rate;
  ReportAgainst(state, rate, raw_upload_bytes_per_second, "x_raw_grpc");
}

void BM_RawGrpcDownloadOtherProcess(benchmark::State& state) {
  if (!bench::SharedEcho().ready) return state.SkipWithError("raw_echo_server did not start");
  const double rate = MeasureRawDownload(state, OtherProcessRawBytes());
  raw_process_download_bytes_per_second[state.range(0)] = rate;
  ReportAgainst(state, rate, raw_download_bytes_per_second, "x_raw_grpc");
}

// Through the daemon: one gpucmdd child process for the whole run.
BenchDaemon& SharedDaemon() {
  static BenchDaemon daemon(
      "cpu { memory_bytes_per_device: " + std::to_string(kDeviceBytes) + " }");
  return daemon;
}

// A daemon whose payload cache keeps a 256 MiB transfer's memory (Note [Payload pool]):
// what an operator who moves payloads that large inline would configure.
BenchDaemon& LargeCacheDaemon() {
  static BenchDaemon daemon(
      "cpu { memory_bytes_per_device: " + std::to_string(kDeviceBytes) + " }",
      "payload_cache_bytes: " + std::to_string(uint64_t{768} << 20));
  return daemon;
}

// The daemon a benchmark's second argument names: 0 the default one, 1 LargeCacheDaemon.
BenchDaemon& DaemonOfArgument(const benchmark::State& state) {
  return state.range(1) == 1 ? LargeCacheDaemon() : SharedDaemon();
}

// An inline write per iteration, `returns` as the client asks: answered once queued and
// followed by a Synchronize (two calls), or answered once copied (one call, as the bare
// upload is).
void MeasureDaemonWrite(benchmark::State& state, WriteReturns returns) {
  size_t size = state.range(0);
  BenchDaemon& daemon = DaemonOfArgument(state);
  Session& session = *daemon.session;
  Buffer buffer = *session.Allocate(size);
  std::string data(size, 'w');
  bench::WriteUntimed(session, buffer, data);
  const bool synchronize = returns == WriteReturns::kWhenQueued;
  FaultCounter faults(daemon.process->pid());
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.Write(buffer, 0, data, 0, std::nullopt, returns));
    if (synchronize) benchmark::DoNotOptimize(session.Synchronize(0));
  }
  const double seconds = SecondsSince(start);
  faults.Report(state);
  ReportThroughput(state, size, seconds);
  ReportAgainstRaw(state, seconds, raw_upload_bytes_per_second,
                   raw_process_upload_bytes_per_second);
}

void BM_DaemonWrite(benchmark::State& state) {
  MeasureDaemonWrite(state, WriteReturns::kWhenQueued);
}

void BM_DaemonWriteAnsweredWhenCopied(benchmark::State& state) {
  MeasureDaemonWrite(state, WriteReturns::kWhenCopied);
}

// An inline read of `state.range(0)` bytes per iteration, by `read(session, buffer)`.
void MeasureDaemonRead(benchmark::State& state,
                       const std::function<absl::Status(Session&, const Buffer&)>& read) {
  size_t size = state.range(0);
  BenchDaemon& daemon = DaemonOfArgument(state);
  Session& session = *daemon.session;
  Buffer buffer = *session.Allocate(size);
  bench::WriteUntimed(session, buffer, std::string(size, 'r'));
  FaultCounter faults(daemon.process->pid());
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(read(session, buffer));
  const double seconds = SecondsSince(start);
  faults.Report(state);
  ReportThroughput(state, size, seconds);
  ReportAgainstRaw(state, seconds, raw_download_bytes_per_second,
                   raw_process_download_bytes_per_second);
}

// Each read's bytes in a string the client allocates for it.
void BM_DaemonRead(benchmark::State& state) {
  MeasureDaemonRead(state, [size = state.range(0)](Session& session, const Buffer& buffer) {
    return session.Read(buffer, 0, size).status();
  });
}

// Each read's bytes into the same memory of the caller's, touched before the loop.
void BM_DaemonReadInto(benchmark::State& state) {
  std::vector<std::byte> memory(state.range(0), std::byte{1});
  MeasureDaemonRead(state, [&memory](Session& session, const Buffer& buffer) {
    return session.Read(buffer, 0, absl::MakeSpan(memory));
  });
}

// Inline transfers of `state.range(0)` bytes against the bare service in its own process,
// in alternating chunks of kChunkTransfers each, so that both meet the machine in the same
// state (this VM's speed drifts within seconds, by more than the gap between the two at a
// few KiB): the quartiles of the chunk pairs' ratios, bare time over the daemon's
// (`x_raw_grpc_process_p25`, `_p50`, `_p75`; higher is better). `state.range(1)`: 0 a
// write answered once copied against an upload, 1 a read against a download.
void BM_DaemonInlineAlternating(benchmark::State& state) {
  if (!bench::SharedEcho().ready) return state.SkipWithError("raw_echo_server did not start");
  constexpr int kChunkTransfers = 16;
  const size_t size = state.range(0);
  const bool reads = state.range(1) == 1;
  bench::RawBytes::Stub& raw = OtherProcessRawBytes();
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  const std::string data(size, 'a');
  const auto raw_transfer = [&] {
    if (reads) {
      DownloadOnce(raw, size);
    } else {
      UploadOnce(raw, data);
    }
  };
  const auto daemon_transfer = [&] {
    if (reads) {
      benchmark::DoNotOptimize(session.Read(buffer, 0, size));
    } else {
      benchmark::DoNotOptimize(
          session.Write(buffer, 0, data, 0, std::nullopt, WriteReturns::kWhenCopied));
    }
  };
  // Untimed: both channels warmed each way, the buffer's pages touched.
  WarmRawChannel(raw, size);
  bench::WriteUntimed(session, buffer, data);
  (void)session.Read(buffer, 0, size);
  const auto time_chunk = [](const auto& transfer) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kChunkTransfers; ++i) transfer();
    return SecondsSince(start);
  };
  std::vector<double> ratios;
  for (auto _ : state) {
    const double raw_seconds = time_chunk(raw_transfer);
    ratios.push_back(raw_seconds / time_chunk(daemon_transfer));
  }
  bench::ReportQuartiles(state, "x_raw_grpc_process", ratios);
}

// Sends `batch` once per iteration, one batch at a time, and parses its answer, which
// `answered` checks; reports the throughput of `state.range(0)` bytes per batch against
// the bare service's `raw` and `raw_process` rates of the same size.
void MeasureBatches(benchmark::State& state, const v1::SubmitRequest& batch,
                    const std::function<bool(const v1::SubmitResponse&)>& answered,
                    const std::map<int64_t, double>& raw,
                    const std::map<int64_t, double>& raw_process) {
  bench::RepeatedBatches batches(*SharedDaemon().client, batch);
  FaultCounter faults(SharedDaemon().process->pid());
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    batches.Send();
    const v1::SubmitResponse* answer = batches.Receive();
    if (answer == nullptr || !answered(*answer)) {
      return state.SkipWithError("a batch was not answered as expected");
    }
  }
  const double seconds = SecondsSince(start);
  faults.Report(state);
  ReportThroughput(state, state.range(0), seconds);
  ReportAgainstRaw(state, seconds, raw, raw_process);
}

// One inline read of `state.range(0)` bytes per Submit batch: what a read in a batch
// costs against the bare download of the same size.
void BM_DaemonReadInBatch(benchmark::State& state) {
  const size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  bench::WriteUntimed(session, buffer, std::string(size, 'r'));
  v1::SubmitRequest batch;
  v1::ReadRequest* read = batch.add_commands()->mutable_read();
  read->set_session(session.token());
  read->set_buffer(buffer.id());
  read->set_size_bytes(size);
  MeasureBatches(
      state, batch,
      [size](const v1::SubmitResponse& answer) {
        return answer.replies_size() == 1 && answer.replies(0).read().data().size() == size;
      },
      raw_download_bytes_per_second, raw_process_download_bytes_per_second);
}

// One inline write of `state.range(0)` bytes and a Synchronize per Submit batch: what a
// write in a batch costs against the bare upload of the same size.
void BM_DaemonWriteInBatch(benchmark::State& state) {
  const size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  bench::WriteUntimed(session, buffer, std::string(size, 'w'));
  v1::SubmitRequest batch;
  v1::WriteRequest* write = batch.add_commands()->mutable_write();
  write->mutable_header()->set_session(session.token());
  write->mutable_header()->set_buffer(buffer.id());
  write->mutable_header()->set_inline_size_bytes(size);
  write->set_data(std::string(size, 'w'));
  batch.add_commands()->mutable_synchronize()->set_session(session.token());
  MeasureBatches(
      state, batch,
      [](const v1::SubmitResponse& answer) {
        return answer.replies_size() == 2 && answer.replies(0).status().code() == 0 &&
               answer.replies(1).status().code() == 0;
      },
      raw_upload_bytes_per_second, raw_process_upload_bytes_per_second);
}

// Through the daemon from and into a shared-memory region: no bytes over gRPC, one copy;
// each call returns once its bytes landed. `transfer` runs once per iteration, timed
// alone. Two baselines are measured beside each transfer, so that all meet the machine
// (its speed, its caches, how long its CPUs slept) in the same state:
// - a memcpy of the same size: the quartiles of memcpy / transfer (`x_memcpy_p25`,
//   `_p50`, `_p75`). Like the transfer's region and buffer, its two buffers are touched
//   once per iteration: the memcpy that precedes the next transfer copies another pair;
// - that memcpy plus the round trip of an idle Synchronize issued right after another
//   such memcpy (what any call costs a client that just spent that long copying): the
//   quartiles of their sum / transfer (`x_memcpy_and_round_trip_*`), how close the
//   transfer comes to one copy and one bare round trip.
void MeasureSharedMemoryTransfer(benchmark::State& state, Session& session, size_t size,
                                 const std::function<absl::Status()>& transfer) {
  (void)transfer();  // untimed: pages touched for the first time
  bench::MemcpyAlongside memcpy_alongside(size);
  bench::MemcpyAlongside memcpy_before(size);
  std::vector<double> against_memcpy, against_memcpy_and_round_trip;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(transfer());
    const double seconds = SecondsSince(start);
    state.SetIterationTime(seconds);
    const double memcpy_seconds = memcpy_alongside.Seconds();
    auto round_trip_start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(session.Synchronize(0));
    const double round_trip_seconds = SecondsSince(round_trip_start);
    against_memcpy.push_back(memcpy_seconds / seconds);
    against_memcpy_and_round_trip.push_back((memcpy_seconds + round_trip_seconds) / seconds);
    memcpy_before.Seconds();  // the next transfer, too, follows a memcpy
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
  bench::ReportQuartiles(state, "x_memcpy", against_memcpy);
  bench::ReportQuartiles(state, "x_memcpy_and_round_trip", against_memcpy_and_round_trip);
}

void BM_DaemonSharedMemoryWrite(benchmark::State& state) {
  size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  SharedMemoryRegion region = *SharedMemoryRegion::Create(session, size);
  std::memset(region.data(), 'w', size);
  MeasureSharedMemoryTransfer(state, session, size, [&] {
    return session.Write(buffer, 0, RegionSlice{region, 0, size});
  });
}

void BM_DaemonSharedMemoryRead(benchmark::State& state) {
  size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  bench::WriteUntimed(session, buffer, std::string(size, 'r'));
  SharedMemoryRegion region = *SharedMemoryRegion::Create(session, size);
  MeasureSharedMemoryTransfer(state, session, size, [&] {
    return session.Read(buffer, 0, RegionSlice{region, 0, size});
  });
}

// Times `measured` in each iteration and, untimed right after it, `baseline`: throughput
// of `bytes` per iteration (with `x_memcpy`) and the quartiles of the pairs' ratios,
// the baseline's time over the measured one's (`<baseline_name>_p25`, `_p50`, `_p75`).
void MeasureAgainstAlternating(benchmark::State& state, uint64_t bytes,
                               absl::FunctionRef<void()> measured,
                               absl::FunctionRef<void()> baseline,
                               const std::string& baseline_name) {
  std::vector<double> ratios;
  double measured_seconds = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    measured();
    const double took = SecondsSince(start);
    measured_seconds += took;
    state.PauseTiming();
    start = std::chrono::steady_clock::now();
    baseline();
    ratios.push_back(SecondsSince(start) / took);
    state.ResumeTiming();
  }
  ReportThroughput(state, bytes, measured_seconds);
  bench::ReportQuartiles(state, baseline_name, ratios);
}

// A device-side Fill of `state.range(0)` zero bytes then a Synchronize, against an inline
// write of as many zeros answered once copied (what a client without Fill sends), in
// alternating pairs (`x_inline_write`).
void BM_DaemonFill(benchmark::State& state) {
  const size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  const std::string zeros(size, '\0');
  bench::WriteUntimed(session, buffer, zeros);
  MeasureAgainstAlternating(
      state, size,
      [&] {
        benchmark::DoNotOptimize(session.Fill(buffer, 0, size, 0, /*element_bytes=*/4));
        benchmark::DoNotOptimize(session.Synchronize(0));
      },
      [&] {
        benchmark::DoNotOptimize(
            session.Write(buffer, 0, zeros, 0, std::nullopt, WriteReturns::kWhenCopied));
      },
      "x_inline_write");
}

// One pitched Fill of `state.range(0)` rows of 3000 bytes, 4096 apart (a 2D view's), then
// a Synchronize, against a Fill per row then a Synchronize (what a client without pitched
// fills sends), in alternating pairs (`x_row_fills`).
void BM_DaemonPitchedFill(benchmark::State& state) {
  constexpr uint64_t kWidth = 3000, kStride = 4096;
  const uint64_t rows = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(rows * kStride);
  MeasureAgainstAlternating(
      state, rows * kWidth,
      [&] {
        benchmark::DoNotOptimize(session.Fill(buffer, 0, Pitched{kWidth, rows, kStride}, 0, 4));
        benchmark::DoNotOptimize(session.Synchronize(0));
      },
      [&] {
        for (uint64_t row = 0; row < rows; ++row) {
          benchmark::DoNotOptimize(session.Fill(buffer, row * kStride, kWidth, 0, 4));
        }
        benchmark::DoNotOptimize(session.Synchronize(0));
      },
      "x_row_fills");
}

// One pitched Copy of `state.range(0)` rows of 3000 bytes, 4096 apart (a 2D view's), into
// packed rows of another buffer, then a Synchronize, against a Copy per row then a
// Synchronize (what a client without pitched copies sends), in alternating pairs
// (`x_row_copies`).
void BM_DaemonPitchedCopy(benchmark::State& state) {
  constexpr uint64_t kWidth = 3000, kStride = 4096;
  const uint64_t rows = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer source = *session.Allocate(rows * kStride);
  Buffer target = *session.Allocate(rows * kWidth);
  MeasureAgainstAlternating(
      state, rows * kWidth,
      [&] {
        benchmark::DoNotOptimize(
            session.Copy(source, 0, target, 0, CopyRows{kWidth, rows, kStride, kWidth}));
        benchmark::DoNotOptimize(session.Synchronize(0));
      },
      [&] {
        for (uint64_t row = 0; row < rows; ++row) {
          benchmark::DoNotOptimize(
              session.Copy(source, row * kStride, target, row * kWidth, kWidth));
        }
        benchmark::DoNotOptimize(session.Synchronize(0));
      },
      "x_row_copies");
}

void BM_DaemonAllocateFree(benchmark::State& state) {
  Session& session = *SharedDaemon().session;
  for (auto _ : state) {
    absl::StatusOr<Buffer> buffer = session.Allocate(state.range(0));
    benchmark::DoNotOptimize(buffer->Free());
  }
  state.SetItemsProcessed(state.iterations());
}

// Powers of 16 from 4 KiB to 256 MiB, and 64 MiB (the default payload cache's size).
#define THROUGHPUT_SIZES \
  RangeMultiplier(16)->Range(4 << 10, 256 << 20)->Arg(64 << 20)->UseRealTime()

BENCHMARK(BM_Memcpy)->THROUGHPUT_SIZES;
// The bare service also at 8 MiB: the largest power of two one Submit batch carries.
BENCHMARK(BM_RawGrpcUpload)->THROUGHPUT_SIZES->Arg(8 << 20);
BENCHMARK(BM_RawGrpcDownload)->THROUGHPUT_SIZES->Arg(8 << 20);
BENCHMARK(BM_RawGrpcUploadOtherProcess)->THROUGHPUT_SIZES->Arg(8 << 20);
BENCHMARK(BM_RawGrpcDownloadOtherProcess)->THROUGHPUT_SIZES->Arg(8 << 20);
BENCHMARK(BM_CommandWrite)->THROUGHPUT_SIZES;
BENCHMARK(BM_CommandRead)->THROUGHPUT_SIZES;
// Second argument: 0 the default daemon, 1 the one with a large payload cache.
#define DAEMON_SIZES \
  ArgsProduct({benchmark::CreateRange(4 << 10, 256 << 20, 16), {0}}) \
      ->Args({64 << 20, 0})                                          \
      ->Args({256 << 20, 1})                                         \
      ->UseRealTime()
BENCHMARK(BM_DaemonWrite)->DAEMON_SIZES;
BENCHMARK(BM_DaemonWriteAnsweredWhenCopied)->DAEMON_SIZES;
BENCHMARK(BM_DaemonRead)->DAEMON_SIZES;
BENCHMARK(BM_DaemonReadInto)->DAEMON_SIZES;
BENCHMARK(BM_DaemonInlineAlternating)
    ->ArgsProduct({{4 << 10, 64 << 10}, {0, 1}})
    ->UseRealTime();
#define BATCH_SIZES Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)->Arg(8 << 20)->UseRealTime()
BENCHMARK(BM_DaemonWriteInBatch)->BATCH_SIZES;
BENCHMARK(BM_DaemonReadInBatch)->BATCH_SIZES;
// Bulk sizes, where shared memory is meant to come close to memcpy (16 MiB and more), and
// the sizes below, where the round trip weighs as much as the copy.
#define BULK_SIZES \
  Arg(1 << 20)->Arg(4 << 20)->Arg(16 << 20)->Arg(64 << 20)->Arg(256 << 20)->UseManualTime()
BENCHMARK(BM_DaemonSharedMemoryWrite)->BULK_SIZES;
BENCHMARK(BM_DaemonSharedMemoryRead)->BULK_SIZES;
BENCHMARK(BM_DaemonFill)->Arg(4 << 10)->Arg(1 << 20)->Arg(16 << 20)->UseRealTime();
BENCHMARK(BM_DaemonPitchedFill)->Arg(16)->Arg(256)->Arg(4096)->UseRealTime();
BENCHMARK(BM_DaemonPitchedCopy)->Arg(16)->Arg(256)->Arg(4096)->UseRealTime();
BENCHMARK(BM_CommandAllocateFree)->Arg(4096)->Arg(1 << 20);
BENCHMARK(BM_DaemonAllocateFree)->Arg(4096)->Arg(1 << 20)->UseRealTime();

}  // namespace
}  // namespace gpucmd
