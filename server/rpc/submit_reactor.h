#ifndef GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_
#define GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_

// Batches of commands over the Submit stream. Each message is one batch: every command
// is checked and converted on arrival (the same conversion its unary RPC gets), then the
// batch runs in order. Consecutive device commands of one session run as one device task
// (one queue hop for the lot); a compile runs on the compile pool between them; reads
// finish off the device thread. Batch-local references and failure propagation: Note
// [One command path] in server/core/batch.h.
//
// Batches run one at a time, in the order they came, while the reactor reads up to
// kMaxBatchesAhead more (converting each as it arrives) and writes the answers of
// finished ones: a client that keeps several batches in flight never leaves the device
// idle for a round trip. A batch is answered by one response, or, when it asks for
// stream_replies, by one per run of commands as they complete; the last says batch_done.
// Replies that together pass the message limit go in several responses (one reply
// never does: a read in a batch returns at most a message's worth of bytes).
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
// Thread-safety: gRPC runs one reactor callback at a time; the running batch is carried
// on by one thread at a time (device, completion or compile thread); what both touch is
// guarded by `mutex_`.

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "base/mutex.h"
#include "google/protobuf/arena.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "server/core/batch.h"
#include "server/core/inline_budget.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

// Served raw (Note [Requests that do not parse] in server/rpc/raw_messages.h): a batch
// that does not parse stops the reading, and once the batches before it are answered
// the call ends INVALID_ARGUMENT.
class SubmitReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Batches read while one runs before the reactor waits for it.
  static constexpr size_t kMaxBatchesAhead = 4;

  // `environment` must outlive the call.
  SubmitReactor(const RpcEnvironment* environment, grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { Unref(); }

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
    std::vector<std::optional<SessionInfo>> sessions;  // per command, when it resolved
    std::shared_ptr<Batch> batch;
    size_t next = 0;              // the first command not run yet
    size_t unsent = 0;            // the first reply not sent yet (stream_replies)
    // Its writes' share of their sessions' inline budgets, until the batch is done.
    std::vector<InlineBudget::Reservation> write_reservations;
    // Its reads' share, until the response that ends the batch is handed to gRPC.
    std::vector<InlineBudget::Reservation> read_reservations;
  };

  // A response to write, and the reads' budget it holds until it is handed to gRPC.
  struct Outgoing {
    grpc::ByteBuffer message;
    std::vector<InlineBudget::Reservation> read_reservations;
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
  // Counts the inline bytes of a converted write or read against its session's budget
  // (Note [Inline payload budget]); RESOURCE_EXHAUSTED past it, INVALID_ARGUMENT for a
  // read whose bytes cannot fit one response.
  absl::Status ReserveInline(const Operation& operation, SessionId session,
                             InFlight& in_flight) const;
  // Runs the running batch from its next command; finishes it after the last.
  void RunNext();
  void RunCompile(size_t index);
  // Commands [begin, end) of one session (and answered ones), in one device task.
  void RunOnDevice(size_t begin, size_t end);
  void Answer(size_t begin, size_t end);
  // Sends the running batch's replies from `unsent` up to `end`, in as many responses as
  // the message limit takes (batch_done on the last when it ends the batch).
  void SendReplies(size_t end, bool batch_done);
  // The running batch is done: runs the next, or ends the call when nothing is left.
  void FinishBatch();
  bool IsCompile(size_t index) const {
    return running_->request->commands(static_cast<int>(index)).has_compile();
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
    bool run = false;                           // the batch just made running_
    std::optional<grpc::Status> finish;
  };
  void Act(const Next& next);
  // Starts the next batch, reading ahead, and ending the call, as far as they are due.
  Next Advance() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const RpcEnvironment* const environment_;
  grpc::CallbackServerContext* const context_;
  std::atomic<int> references_{1};
  grpc::ByteBuffer incoming_;          // the read in progress
  std::unique_ptr<InFlight> running_;  // the batch running, carried by one thread

  Mutex mutex_;
  std::deque<std::unique_ptr<InFlight>> waiting_ ABSL_GUARDED_BY(mutex_);
  bool batch_running_ ABSL_GUARDED_BY(mutex_) = false;
  std::deque<Outgoing> outgoing_ ABSL_GUARDED_BY(mutex_);  // front: being written
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool reading_ ABSL_GUARDED_BY(mutex_) = true;
  bool reads_done_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status unparsed_ ABSL_GUARDED_BY(mutex_);  // a batch did not parse: the call's end
  bool client_gone_ ABSL_GUARDED_BY(mutex_) = false;  // it stopped reading replies
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_
