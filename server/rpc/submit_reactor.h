#ifndef GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_
#define GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_

// Batches of commands over the Submit stream. Each message is one batch: every command
// is checked and converted on arrival (the same conversion its unary RPC gets), then the
// batch runs in order. Consecutive device commands of one session run as one device task
// (one queue hop for the lot); a compile runs on the compile pool between them; reads
// finish off the device thread. Batch-local references and failure propagation: Note
// [One command path] in server/core/batch.h.
//
// Batches run in the order they came, while the reactor reads up to kMaxBatchesAhead
// more (converting each as it arrives) and writes the answers of finished ones: a client
// that keeps several batches in flight never leaves the device idle for a round trip.
// A batch starts once the one before it queued all its device work and only waits for
// it (its reads, its synchronize) are left (Note [Overlapping batches]). A batch is
// answered by one response, or, when it asks for stream_replies, by one per run of
// commands as they complete; the last says batch_done. Responses go out in the order of
// the batches. Replies that together pass the message limit go in several responses
// (one reply never does: a read in a batch returns at most a message's worth of bytes).
//
// Note [Overlapping batches]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A batch that ends in a synchronize would otherwise leave the device idle while its
// answer is written and the next batch is queued, and leave the daemon idle while the
// device runs: the two take turns. So the next batch starts as soon as the one before it
// has queued the last of its device work and only waits for it are left: both are then
// carried at once, by different threads, the older one towards its answer. At most
// kMaxBatchesStarted are started. Nothing a client sees changes: device work still
// reaches the device in the batches' order (streams run it in that order, and a
// synchronize waits for what was queued before it, not after), and a batch whose
// answers are ready before the older one's holds them until that one is answered.
//
// Note [A batch answered where its work ended]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A batch of one run of at most kBriefBatchCommands commands is answered as a unary call
// is (Note [Brief answers where the work ended] in server/core/device_worker.h): where
// its device work ended, with no completion thread woken between the stream's worker
// and gRPC, when its reads' bytes are few (Batch::Run). Filling and serializing a few
// hundred replies is brief. What the answer starts besides (the next batch, the rest
// of a run that stopped for launch room) is queued for the device thread from there.
//
// Note [Replies the client does not read]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A client may send batches and never read the answers. The daemon then holds no more
// than this: no batch starts while kMaxBatchesAhead responses wait to be written, and
// no more are read meanwhile (so the client's sends stall too); a read's bytes count
// against its session's inline budget (Note [Inline payload budget]) from the batch's
// arrival until the response that ends the batch is handed to gRPC, which is before the
// client can hear of it (so a client that sends its next batch on that answer finds the
// budget given back).
//
// Note [Memory the Submit streams hold]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each stream holds a bounded number of batches (read ahead, started, answered and not
// yet sent), but a batch parsed and converted takes several times its bytes on the wire
// (some hundreds of bytes per command), and nothing bounds the number of streams: 200
// streams of 16384-command batches whose answers nobody read held 5 GB and grew. So all
// streams together hold at most limits.max_submit_bytes (ServerCore::submit_budget): a
// batch reserves what it takes once converted (its arena, which holds its commands and
// its replies, and its converted commands), before it is queued; the reservation goes
// with the response that ends the batch and is given back once gRPC has written it. A
// batch past the limit is dropped at once and ends its call RESOURCE_EXHAUSTED naming
// the limit, after the batches before it are answered, as one that does not parse. The
// inline bytes of its writes and reads are bounded per session besides (Note [Inline
// payload budget]).
//
// Note [Batches freed where answers are written]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A batch's memory (its arena of parsed commands and replies, its converted commands) is
// allocated by the gRPC thread that read it. Freed where the batch was answered (the
// stream's worker, for one answered where its work ended), the frees ran on the thread
// that hands the next launches to the device, and every block went back through the
// allocator's shared lists, one thread's cache filled by another's frees. So an answered
// batch waits in `retired_` for the next write to complete and is freed there, on a gRPC
// thread (kernel_bench BM_LaunchEmptyAlternating/4: docs/BENCHMARKS.md). That is no later
// than its own last response is written, which its share of the Submit streams' budget
// waits for anyway; a call that ends unanswered frees the rest with the reactor.
//
// Thread-safety: gRPC runs one reactor callback at a time; each started batch is carried
// on by one thread at a time (device, completion or compile thread); what they share is
// guarded by `mutex_`.

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "base/mutex.h"
#include "driver/bytes.h"
#include "google/protobuf/arena.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "server/core/batch.h"
#include "server/core/byte_budget.h"
#include "server/core/inline_budget.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

// Served raw (Note [Requests that do not parse] in server/rpc/raw_messages.h): a batch
// that does not parse, or holds more than kMaxCommandsPerBatch commands, stops the
// reading, and once the batches before it are answered the call ends INVALID_ARGUMENT;
// likewise RESOURCE_EXHAUSTED for one past the Submit streams' budget (Note [Memory the
// Submit streams hold]).
//
// It counts itself in Metrics, as MetricsInterceptor counts other calls (in flight until
// OnDone; by status code and latency once it finishes): the service leaves it out of the
// interceptor, which would run on every message of the stream.
class SubmitReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // The method's full name, as the metrics name it.
  static constexpr char kMethod[] = "gpucmd.v1.GpuCommand/Submit";

  // Commands in one batch. With the batches read ahead and started, this bounds what a
  // stream holds (a command converted takes several times its bytes on the wire): a
  // batch past it ends the call INVALID_ARGUMENT, as one that does not parse.
  static constexpr int kMaxCommandsPerBatch = 16384;
  // Batches read while one runs before the reactor waits for it.
  static constexpr size_t kMaxBatchesAhead = 4;
  // Batches started and not answered yet (Note [Overlapping batches]).
  static constexpr size_t kMaxBatchesStarted = 2;
  // The most commands a batch of one run may hold for its answer to be written where its
  // device work ended (Note [A batch answered where its work ended]).
  static constexpr size_t kBriefBatchCommands = 256;

  // `environment` must outlive the call.
  SubmitReactor(const RpcEnvironment* environment, grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override {
    environment_->metrics->RpcEnded();
    Unref();
  }

 private:
  // One batch: its commands, their sessions, its answers, how far it ran.
  struct InFlight {
    // The request's and the replies' messages are allocated in one arena (a few blocks
    // for a batch instead of several allocations per command), and freed with it.
    google::protobuf::Arena arena{kArenaOptions};
    v1::SubmitRequest* const request =
        google::protobuf::Arena::CreateMessage<v1::SubmitRequest>(&arena);
    v1::SubmitResponse* const response =  // a reply per command, in order
        google::protobuf::Arena::CreateMessage<v1::SubmitResponse>(&arena);
    // Per command, when it resolved (null when not): shared by a run of commands naming
    // the same session, which is looked up once.
    std::vector<std::shared_ptr<const SessionInfo>> sessions;
    std::shared_ptr<Batch> batch;
    size_t next = 0;              // the first command not run yet
    size_t unsent = 0;            // the first reply not sent yet (stream_replies)
    // Per command once a read returned bytes inline (empty before): the read's bytes,
    // which its reply is sent from (Note [A batch's reads sent from their bytes] in
    // server/rpc/submit_replies.h); null for the other commands.
    std::vector<std::shared_ptr<const Bytes>> read_bytes;
    // Its writes' share of their sessions' inline budgets, until the batch is done.
    std::vector<InlineBudget::Reservation> write_reservations;
    // Its reads' share, until the response that ends the batch is handed to gRPC.
    std::vector<InlineBudget::Reservation> read_reservations;
    // What it holds of the Submit streams' budget (Note [Memory the Submit streams
    // hold]), until the response that ends the batch is written.
    std::optional<ByteBudget::Reservation> held;
  };

  // A response to write, and the reads' budget it holds until it is handed to gRPC.
  struct Outgoing {
    grpc::ByteBuffer message;
    std::vector<InlineBudget::Reservation> read_reservations;
    std::optional<ByteBudget::Reservation> held;  // the batch's, on the one that ends it
  };

  // A started batch, and where it stands; guarded by `mutex_`.
  struct Started {
    std::unique_ptr<InFlight> in_flight;
    bool queued_all = false;  // only waits for its device work are left
    bool answered = false;    // its last response is made
    std::deque<Outgoing> held;  // responses made while an older batch was unanswered
  };

  // Sized for a batch of some dozens of commands in its first block.
  static inline const google::protobuf::ArenaOptions kArenaOptions = [] {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 16 << 10;
    options.max_block_size = 256 << 10;
    return options;
  }();
  // Checks and converts every command of the parsed `in_flight.request`.
  void Convert(InFlight& in_flight) const;
  // Reserves what the converted `in_flight` holds of the Submit streams' budget.
  absl::Status ReserveHeld(InFlight& in_flight) const;
  // Counts the inline bytes of a converted write or read against its session's budget
  // (Note [Inline payload budget]); past it, the operation carries the refusal
  // (`over_budget`: its write payload dropped). INVALID_ARGUMENT for a read whose bytes
  // cannot fit one response.
  absl::Status ReserveInline(Operation& operation, SessionId session,
                             InFlight& in_flight) const;
  // Runs a started batch from its next command; finishes it after the last.
  void RunNext(InFlight& batch);
  void RunCompile(InFlight& batch, size_t index);
  // Commands [begin, end) of one session (and answered ones), in one device task.
  void RunOnDevice(InFlight& batch, size_t begin, size_t end);
  // How the answer of commands [begin, end) of `batch` runs (Note [A batch answered where
  // its work ended]).
  static DeviceWorker::Answering AnsweringOf(const Batch& batch, size_t begin, size_t end);
  void Answer(InFlight& batch, size_t begin, size_t end);
  // Sends the batch's replies from `unsent` up to `end`, in as many responses as the
  // message limit takes (batch_done on the last, which ends the batch, when it does).
  void SendReplies(InFlight& batch, size_t end, bool batch_done);
  // The batch is done: its last response goes out (after the older batches' ones).
  void FinishBatch(InFlight& batch);
  // Called in the device task that queued the last of the batch's device work: the next
  // batch may start, after that task (Note [Overlapping batches]).
  void QueuedAll(InFlight& batch, DeviceWorker& worker);
  static bool IsCompile(const InFlight& batch, size_t index) {
    return batch.request->commands(static_cast<int>(index)).has_compile();
  }

  // gRPC holds a reference until OnDone, and so does every callback of the device or
  // the compile cache still to run: another thread may end the call (and gRPC run
  // OnDone) while one of those is still on its way out.
  void Ref() { references_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (references_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // What the reactor should do once it let go of `mutex_`.
  struct Next {
    bool read = false;
    const grpc::ByteBuffer* write = nullptr;  // to start writing
    InFlight* run = nullptr;                    // the batch just started
    std::optional<grpc::Status> finish;
  };
  void Act(const Next& next);
  // Starts the next batch, reading ahead, and ending the call, as far as they are due.
  Next Advance() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  Started& StartedOf(const InFlight& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Moves the answered batches at the front of `started_` to `retired_`, queueing the
  // held responses of the batch that becomes the oldest.
  void Retire() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const RpcEnvironment* const environment_;
  grpc::CallbackServerContext* const context_;
  const std::chrono::steady_clock::time_point started_at_ = std::chrono::steady_clock::now();
  std::atomic<int> references_{1};
  grpc::ByteBuffer incoming_;  // the read in progress

  Mutex mutex_;
  std::deque<std::unique_ptr<InFlight>> waiting_ ABSL_GUARDED_BY(mutex_);
  std::deque<Started> started_ ABSL_GUARDED_BY(mutex_);  // oldest first
  std::deque<Outgoing> outgoing_ ABSL_GUARDED_BY(mutex_);  // front: being written
  // Answered batches, freed by the next write's completion (Note [Batches freed where
  // answers are written]).
  std::vector<std::unique_ptr<InFlight>> retired_ ABSL_GUARDED_BY(mutex_);
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool reading_ ABSL_GUARDED_BY(mutex_) = true;
  bool reads_done_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status refused_ ABSL_GUARDED_BY(mutex_);  // a batch was refused: the call's end
  bool client_gone_ ABSL_GUARDED_BY(mutex_) = false;  // it stopped reading replies
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_
