// The RPC layer in-process: GpuCommandService and its reactors over a real ServerCore
// whose devices run FakeCommand (a test double: no driver, no daemon process), reached
// through a real gRPC channel. This is the most concurrent code of the daemon, so it
// also runs under ThreadSanitizer (with the suppressions of tools/tsan.supp).

#include "server/rpc/service.h"

#include <filesystem>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "driver/front_end/kernel_parser.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/command/fake_command.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/submit_reactor.h"
#include "server/core/worker_test_calls.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kCapacityBytes = 1 << 20;
constexpr char kKernel[] = R"(extern "C" __global__ void scale(float* data, int n) {})";

// What the fake compiler sees as a compile error.
constexpr char kBrokenKernel[] = "this does not compile";
// A compile error whose log takes 5000 bytes.
constexpr char kLongLogKernel[] = "this does not compile at length";

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char directory[] = "/tmp/gpucmd-service-test-XXXXXX";
    ASSERT_NE(mkdtemp(directory), nullptr);
    directory_ = directory;
    metrics_ = std::make_unique<Metrics>(1);
    std::vector<std::unique_ptr<DeviceWorker>> workers;
    workers.push_back(std::make_unique<DeviceWorker>(
        DeviceWorker::Options{.ordinal = 0},
        [this]() -> absl::StatusOr<std::shared_ptr<CommandInterface>> {
          auto command = std::make_shared<FakeCommand>(kCapacityBytes);
          fake_ = command.get();
          return command;
        },
        metrics_.get()));
    core_ = std::make_unique<ServerCore>(std::move(workers), ServerCore::Options());
    core_->worker(0).AwaitInitialised();
    absl::StatusOr<ModuleStore> modules = ModuleStore::Open(directory_ + "/modules", ".fake");
    ASSERT_TRUE(modules.ok()) << modules.status();
    compiler_ = CompileCache::Create(
        {.driver = "fake", .architecture = "none"}, *std::move(modules),
        [](const KernelSource& kernel,
           const std::string& artifact) -> absl::StatusOr<CompileOutput> {
          if (kernel.source == kBrokenKernel) {
            return absl::InvalidArgumentError("1: error: expected a declaration");
          }
          if (kernel.source == kLongLogKernel) {
            return absl::InvalidArgumentError(std::string(5000, 'e'));
          }
          std::ofstream(artifact) << "fake artifact";
          absl::StatusOr<ParsedKernel> parsed =
              ParseKernel(kernel.source, kernel.entry_point, kernel.options);
          if (!parsed.ok()) return parsed.status();
          return CompileOutput{.params = parsed->params};
        });
    DeviceDescription device{.ordinal = 0,
                             .name = "fake",
                             .memory_capacity_bytes = kCapacityBytes,
                             .max_threads_per_block = 1024};
    service_ = std::make_unique<GpuCommandService>(std::vector<DeviceDescription>{device},
                                                   core_.get(), compiler_.get(),
                                                   metrics_.get(), 4 << 20);
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
    stub_ = v1::GpuCommand::NewStub(channel_);
    token_ = OpenSession();
  }

  void TearDown() override {
    server_->Shutdown();
    core_->Stop();
    std::filesystem::remove_all(directory_);
  }

  std::string OpenSession() {
    grpc::ClientContext context;
    v1::OpenSessionRequest request;
    v1::OpenSessionResponse response;
    EXPECT_TRUE(stub_->OpenSession(&context, request, &response).ok());
    return response.session();
  }

  // Sends one batch on a fresh Submit stream and returns its replies.
  v1::SubmitResponse Submit(const v1::SubmitRequest& batch) {
    grpc::ClientContext context;
    auto stream = stub_->Submit(&context);
    EXPECT_TRUE(stream->Write(batch));
    v1::SubmitResponse replies;
    EXPECT_TRUE(stream->Read(&replies));
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    EXPECT_EQ(replies.replies_size(), batch.commands_size());
    EXPECT_TRUE(replies.batch_done());
    return replies;
  }

  // A batch of `count` allocations of `size_bytes`, then a synchronize, with sequences
  // from `first`.
  v1::SubmitRequest Allocations(uint64_t first, int count, uint64_t size_bytes) {
    v1::SubmitRequest batch;
    for (int i = 0; i < count; ++i) {
      v1::AllocateRequest* allocate = Add(batch, first + i)->mutable_allocate();
      allocate->set_session(token_);
      allocate->set_size_bytes(size_bytes);
    }
    Add(batch, first + count)->mutable_synchronize()->set_session(token_);
    return batch;
  }

  v1::Command* Add(v1::SubmitRequest& batch, uint64_t sequence) {
    v1::Command* command = batch.add_commands();
    command->set_sequence(sequence);
    return command;
  }

  static absl::StatusCode Code(const v1::CommandReply& reply) {
    return static_cast<absl::StatusCode>(reply.status().code());
  }

  // Streams a unary Write: `header`, then `data` in one message.
  grpc::Status StreamWrite(const v1::WriteHeader& header, const std::string& data) {
    grpc::ClientContext context;
    v1::WriteResponse response;
    auto writer = stub_->Write(&context, &response);
    v1::WriteRequest request;
    *request.mutable_header() = header;
    request.set_data(data);
    writer->Write(request);
    writer->WritesDone();
    return writer->Finish();
  }

  std::string directory_;
  std::unique_ptr<Metrics> metrics_;
  FakeCommand* fake_ = nullptr;  // owned by the device thread's Command slot
  std::unique_ptr<ServerCore> core_;
  std::unique_ptr<CompileCache> compiler_;
  std::unique_ptr<GpuCommandService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::GpuCommand::Stub> stub_;
  std::string token_;
};

TEST_F(ServiceTest, OneBatchAllocatesWritesCopiesReadsAndFreesThroughReferences) {
  v1::SubmitRequest batch;
  Add(batch, 1)->mutable_allocate()->set_session(token_);
  Add(batch, 1)->mutable_allocate();  // sequence 1 again, but no session: rejected
  v1::AllocateRequest* second = Add(batch, 2)->mutable_allocate();
  second->set_session(token_);
  second->set_size_bytes(8);
  batch.mutable_commands(0)->mutable_allocate()->set_size_bytes(8);
  batch.mutable_commands(1)->set_sequence(3);
  v1::WriteRequest* write = Add(batch, 4)->mutable_write();
  write->mutable_header()->set_session(token_);
  write->mutable_header()->set_buffer_ref(1);
  write->mutable_header()->set_inline_size_bytes(8);
  write->set_data("abcdefgh");
  v1::CopyRequest* copy = Add(batch, 5)->mutable_copy();
  copy->set_session(token_);
  copy->set_source_buffer_ref(1);
  copy->set_target_buffer_ref(2);
  copy->set_size_bytes(8);
  v1::ReadRequest* read = Add(batch, 6)->mutable_read();
  read->set_session(token_);
  read->set_buffer_ref(2);
  read->set_size_bytes(8);
  for (uint64_t ref : {1, 2}) {
    v1::FreeRequest* free = Add(batch, 6 + ref)->mutable_free();
    free->set_session(token_);
    free->set_buffer_ref(ref);
  }
  v1::SubmitResponse replies = Submit(batch);
  EXPECT_EQ(Code(replies.replies(1)), absl::StatusCode::kInvalidArgument);
  for (int i : {0, 2, 3, 4, 5, 6, 7}) {
    EXPECT_EQ(Code(replies.replies(i)), absl::StatusCode::kOk)
        << i << ": " << replies.replies(i).status().message();
  }
  EXPECT_NE(replies.replies(0).allocate().buffer(), replies.replies(2).allocate().buffer());
  EXPECT_EQ(replies.replies(3).write().bytes_written(), 8u);
  EXPECT_EQ(replies.replies(5).read().data(), "abcdefgh");
  EXPECT_EQ(replies.replies(5).read().total_bytes(), 8u);
  EXPECT_EQ(core_->worker(0).usage().memory_used_bytes, 0u) << "both freed by reference";
}

TEST_F(ServiceTest, AFailedCommandFailsItsDependentsWhileOthersRun) {
  v1::SubmitRequest batch;
  v1::AllocateRequest* huge = Add(batch, 10)->mutable_allocate();
  huge->set_session(token_);
  huge->set_size_bytes(kCapacityBytes * 4);
  v1::AllocateRequest* small = Add(batch, 11)->mutable_allocate();
  small->set_session(token_);
  small->set_size_bytes(4);
  for (uint64_t ref : {10, 11}) {
    v1::WriteRequest* write = Add(batch, 20 + ref)->mutable_write();
    write->mutable_header()->set_session(token_);
    write->mutable_header()->set_buffer_ref(ref);
    write->mutable_header()->set_inline_size_bytes(4);
    write->set_data("data");
  }
  v1::SubmitResponse replies = Submit(batch);
  EXPECT_EQ(Code(replies.replies(0)), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Code(replies.replies(1)), absl::StatusCode::kOk);
  EXPECT_EQ(Code(replies.replies(2)), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(replies.replies(2).status().message(), HasSubstr("command 10 (allocate)"));
  EXPECT_EQ(Code(replies.replies(3)), absl::StatusCode::kOk);
}

TEST_F(ServiceTest, AWriteRejectedBeforeQueueingFailsLaterReadersOfItsBuffer) {
  v1::SubmitRequest batch;
  v1::AllocateRequest* allocate = Add(batch, 1)->mutable_allocate();
  allocate->set_session(token_);
  allocate->set_size_bytes(4);
  v1::WriteRequest* good = Add(batch, 2)->mutable_write();
  good->mutable_header()->set_session(token_);
  good->mutable_header()->set_buffer_ref(1);
  good->mutable_header()->set_inline_size_bytes(4);
  good->set_data("good");
  auto add_read = [&](uint64_t sequence) {
    v1::ReadRequest* read = Add(batch, sequence)->mutable_read();
    read->set_session(token_);
    read->set_buffer_ref(1);
    read->set_size_bytes(4);
  };
  add_read(3);
  v1::WriteRequest* short_write = Add(batch, 4)->mutable_write();  // declares 4, carries 2
  short_write->mutable_header()->set_session(token_);
  short_write->mutable_header()->set_buffer_ref(1);
  short_write->mutable_header()->set_inline_size_bytes(4);
  short_write->set_data("ba");
  add_read(5);
  v1::SubmitResponse replies = Submit(batch);
  EXPECT_EQ(Code(replies.replies(2)), absl::StatusCode::kOk) << "read before the bad write";
  EXPECT_EQ(replies.replies(2).read().data(), "good");
  EXPECT_EQ(Code(replies.replies(3)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Code(replies.replies(4)), absl::StatusCode::kFailedPrecondition)
      << "must not return the bytes the rejected write was to replace";
  EXPECT_THAT(replies.replies(4).status().message(), HasSubstr("command 4 (write)"));
}

TEST_F(ServiceTest, BatchesSentAheadAreAnsweredInOrder) {
  grpc::ClientContext context;
  auto stream = stub_->Submit(&context);
  // More than are read ahead and answered ahead (Note [Replies the client does not read]):
  // sent while the answers are read, as a client must when it sends that many.
  constexpr int kBatches = 4 * SubmitReactor::kMaxBatchesAhead + 1;
  std::thread sender([&] {
    for (int b = 0; b < kBatches; ++b) {
      EXPECT_TRUE(stream->Write(Allocations(100 * b, 3, 64))) << b;
    }
    stream->WritesDone();
  });
  absl::Cleanup join_sender = [&] {
    if (sender.joinable()) {
      context.TryCancel();  // a failed read below: the sender stops too
      sender.join();
    }
  };
  for (int b = 0; b < kBatches; ++b) {
    v1::SubmitResponse replies;
    ASSERT_TRUE(stream->Read(&replies)) << b;
    EXPECT_TRUE(replies.batch_done());
    ASSERT_EQ(replies.replies_size(), 4);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(replies.replies(i).sequence(), uint64_t(100 * b + i));
      EXPECT_EQ(Code(replies.replies(i)), absl::StatusCode::kOk) << replies.replies(i).status().message();
    }
  }
  sender.join();
  v1::SubmitResponse extra;
  EXPECT_FALSE(stream->Read(&extra)) << "nothing more than the batches' answers";
  EXPECT_TRUE(stream->Finish().ok());
}

// A batch of up to kMaxCommandsPerBatch commands is answered command by command (here
// empty ones, each INVALID_ARGUMENT without running); one with more ends the call
// INVALID_ARGUMENT naming the limit, after the batch before it is answered.
TEST_F(ServiceTest, ABatchPastTheCommandLimitEndsTheCallAfterTheOnesBefore) {
  auto empty_commands = [this](int count) {
    v1::SubmitRequest batch;
    for (int i = 0; i < count; ++i) Add(batch, i);
    return batch;
  };
  grpc::ClientContext context;
  auto stream = stub_->Submit(&context);
  ASSERT_TRUE(stream->Write(empty_commands(SubmitReactor::kMaxCommandsPerBatch)));
  stream->Write(empty_commands(SubmitReactor::kMaxCommandsPerBatch + 1));
  stream->WritesDone();
  int replied = 0;
  v1::SubmitResponse replies;
  while (stream->Read(&replies)) {
    for (const v1::CommandReply& reply : replies.replies()) {
      EXPECT_EQ(Code(reply), absl::StatusCode::kInvalidArgument);
      ++replied;
    }
  }
  EXPECT_EQ(replied, SubmitReactor::kMaxCommandsPerBatch) << "the first batch, in full";
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("at most 16384 commands"));
}

// Note [Memory the Submit streams hold]: a batch reserves what it holds of the daemon's
// budget for all Submit streams until its answer is written. One that does not fit (the
// test holds the rest of the budget, as other streams would) runs nothing and ends the
// call RESOURCE_EXHAUSTED naming the limit, after the batch before it is answered; what
// the call held is all given back.
TEST_F(ServiceTest, ABatchPastTheSubmitStreamsBudgetEndsTheCallAfterTheOnesBefore) {
  ByteBudget& budget = core_->submit_budget();
  auto release = std::make_shared<absl::Notification>();
  fake_->HoldSynchronizes(release);
  absl::Cleanup release_on_exit = [&] {
    if (!release->HasBeenNotified()) release->Notify();
  };
  const uint64_t used_before = core_->worker(0).usage().memory_used_bytes;
  grpc::ClientContext context;
  auto stream = stub_->Submit(&context);
  ASSERT_TRUE(stream->Write(Allocations(0, 1, 256)));  // held at its synchronize
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (core_->worker(0).usage().memory_used_bytes != used_before + 256) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the first batch did not run";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const uint64_t one_batch = budget.held();
  ASSERT_GT(one_batch, 0u);
  std::optional<ByteBudget::Reservation> others =
      *budget.Reserve(ServerCore::Options().submit_bytes - one_batch - one_batch / 2, "others");
  // Refused whether or not the first batch gave its share back by then: it needs many
  // times more than the first batch's share and the half besides.
  ASSERT_TRUE(stream->Write(Allocations(10, 2000, 256)));
  stream->WritesDone();
  release->Notify();
  int replied = 0;
  v1::SubmitResponse replies;
  while (stream->Read(&replies)) {
    for (const v1::CommandReply& reply : replies.replies()) {
      EXPECT_LT(reply.sequence(), 10u) << "only the first batch is answered";
      EXPECT_EQ(Code(reply), absl::StatusCode::kOk) << reply.status().message();
      ++replied;
    }
  }
  EXPECT_EQ(replied, 2);
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("limits.max_submit_bytes"));
  EXPECT_EQ(core_->worker(0).usage().memory_used_bytes, used_before + 256)
      << "the refused batch allocated nothing";
  EXPECT_EQ(budget.held(), others->bytes()) << "the call gave back all it held";
  others.reset();
  Submit(Allocations(20, 1, 256));  // fits again
  EXPECT_EQ(budget.held(), 0u);
}

// Note [Overlapping batches]: the second batch runs while the first one's synchronize
// still waits, and its answers, ready first, still come after the first batch's.
TEST_F(ServiceTest, ABatchStartsWhileTheOneBeforeWaitsAndIsAnsweredAfterIt) {
  auto release = std::make_shared<absl::Notification>();
  fake_->HoldSynchronizes(release);
  absl::Cleanup release_on_exit = [&] {
    if (!release->HasBeenNotified()) release->Notify();
  };
  const std::string other = OpenSession();
  const uint64_t used_before = core_->worker(0).usage().memory_used_bytes;
  grpc::ClientContext context;
  auto stream = stub_->Submit(&context);
  ASSERT_TRUE(stream->Write(Allocations(0, 1, 256)));  // held at its synchronize
  v1::SubmitRequest second;
  second.set_stream_replies(true);
  for (int i = 0; i < 2; ++i) {
    v1::AllocateRequest* allocate = Add(second, 100 + i)->mutable_allocate();
    allocate->set_session(other);
    allocate->set_size_bytes(512);
  }
  ASSERT_TRUE(stream->Write(second));
  stream->WritesDone();
  // Both batches' allocations are made while the first batch is not answered yet.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (core_->worker(0).usage().memory_used_bytes != used_before + 256 + 2 * 512) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the second batch did not run while the first one waited";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  release->Notify();
  std::vector<uint64_t> sequences;
  std::vector<bool> batch_done;
  v1::SubmitResponse replies;
  while (stream->Read(&replies)) {
    for (const v1::CommandReply& reply : replies.replies()) {
      sequences.push_back(reply.sequence());
      EXPECT_EQ(Code(reply), absl::StatusCode::kOk) << reply.status().message();
    }
    batch_done.push_back(replies.batch_done());
  }
  EXPECT_EQ(sequences, (std::vector<uint64_t>{0, 1, 100, 101}));
  EXPECT_EQ(batch_done, (std::vector<bool>{true, false, true}))
      << "the first batch's answer, then the second's run and its close";
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServiceTest, StreamedRepliesArriveInRunsAndEndWithBatchDone) {
  // Two sessions' commands alternate: each run of one session's commands is answered as
  // soon as it completed.
  const std::string other = OpenSession();
  v1::SubmitRequest batch;
  batch.set_stream_replies(true);
  for (int i = 0; i < 6; ++i) {
    v1::AllocateRequest* allocate = Add(batch, i)->mutable_allocate();
    allocate->set_session(i % 2 == 0 ? token_ : other);
    allocate->set_size_bytes(128);
  }
  grpc::ClientContext context;
  auto stream = stub_->Submit(&context);
  ASSERT_TRUE(stream->Write(batch));
  stream->WritesDone();
  std::vector<uint64_t> sequences;
  int responses = 0;
  v1::SubmitResponse replies;
  while (stream->Read(&replies)) {
    ++responses;
    for (const v1::CommandReply& reply : replies.replies()) {
      sequences.push_back(reply.sequence());
      EXPECT_EQ(Code(reply), absl::StatusCode::kOk) << reply.status().message();
    }
    if (replies.batch_done()) break;
  }
  EXPECT_TRUE(replies.batch_done());
  EXPECT_EQ(sequences, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5})) << "every reply, once, in order";
  EXPECT_GE(responses, 6) << "one response per run, and the closing one";
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServiceTest, StreamedRepliesOfOneRunComeOnceThenTheClosingResponse) {
  v1::SubmitRequest batch;
  batch.set_stream_replies(true);
  for (int i = 0; i < 3; ++i) {
    v1::AllocateRequest* allocate = Add(batch, i)->mutable_allocate();
    allocate->set_session(token_);
    allocate->set_size_bytes(64);
  }
  grpc::ClientContext context;
  auto stream = stub_->Submit(&context);
  ASSERT_TRUE(stream->Write(batch));
  stream->WritesDone();
  std::vector<v1::SubmitResponse> responses;
  v1::SubmitResponse replies;
  while (stream->Read(&replies)) responses.push_back(replies);
  ASSERT_EQ(responses.size(), 2u) << "the run's replies, then the close";
  ASSERT_EQ(responses[0].replies_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(responses[0].replies(i).sequence(), uint64_t(i));
    EXPECT_GT(responses[0].replies(i).allocate().buffer(), 0u);
  }
  EXPECT_FALSE(responses[0].batch_done());
  EXPECT_EQ(responses[1].replies_size(), 0) << "each reply once";
  EXPECT_TRUE(responses[1].batch_done());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServiceTest, UnaryAndSubmitRejectTheSameMalformedWrite) {
  v1::WriteHeader header;
  header.set_session(token_);
  header.set_buffer(1);
  header.set_inline_size_bytes(uint64_t{1} << 40);
  grpc::Status unary = StreamWrite(header, "ab");
  EXPECT_EQ(unary.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::SubmitRequest batch;
  v1::WriteRequest* write = Add(batch, 1)->mutable_write();
  *write->mutable_header() = header;
  write->set_data("ab");
  Add(batch, 2)->mutable_synchronize()->set_session(token_);
  v1::SubmitResponse replies = Submit(batch);
  EXPECT_EQ(Code(replies.replies(0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Code(replies.replies(1)), absl::StatusCode::kOk) << "independent: still runs";

  header.set_inline_size_bytes(4);  // declares 4, carries 2
  *batch.mutable_commands(0)->mutable_write()->mutable_header() = header;
  EXPECT_THAT(Submit(batch).replies(0).status().message(), HasSubstr("declared 4 bytes"));
}

TEST_F(ServiceTest, SubmitCompileRepliesCarryWhatTheUnaryCompileReturns) {
  v1::CompileRequest compile;
  compile.set_session(token_);
  compile.set_source(kKernel);
  compile.set_entry_point("scale");
  grpc::ClientContext context;
  v1::CompileResponse unary;
  ASSERT_TRUE(stub_->Compile(&context, compile, &unary).ok());
  ASSERT_EQ(unary.params_size(), 2);

  v1::SubmitRequest batch;
  *Add(batch, 1)->mutable_compile() = compile;
  compile.set_source(kBrokenKernel);
  *Add(batch, 2)->mutable_compile() = compile;
  v1::SubmitResponse replies = Submit(batch);
  ASSERT_EQ(Code(replies.replies(0)), absl::StatusCode::kOk);
  EXPECT_EQ(replies.replies(0).compile().kernel_id(), unary.kernel_id());
  EXPECT_EQ(replies.replies(0).compile().params_size(), 2);
  EXPECT_EQ(replies.replies(0).compile().params(1).scalar_type(), v1::SCALAR_TYPE_I32);
  EXPECT_TRUE(replies.replies(0).compile().cache_hit());

  EXPECT_EQ(Code(replies.replies(1)), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(replies.replies(1).status().message(), HasSubstr("expected a declaration"));
  grpc::ClientContext failed_context;
  v1::CompileResponse failed;
  EXPECT_FALSE(stub_->Compile(&failed_context, compile, &failed).ok());
  auto trailer = failed_context.GetServerTrailingMetadata().find("gpucmd-kernel-id");
  ASSERT_NE(trailer, failed_context.GetServerTrailingMetadata().end());
  EXPECT_EQ(replies.replies(1).compile().kernel_id(),
            std::string(trailer->second.data(), trailer->second.size()))
      << "a failed compile's id, in the reply as in the unary trailer";
}

// A reply's status message is cut as a call's status is (CapStatusMessage), so that no
// reply outgrows 2 KiB and what it says: a client may rely on a bound for the answer.
TEST_F(ServiceTest, SubmitReplyStatusesAreCutAsCallStatusesAre) {
  v1::CompileRequest compile;
  compile.set_session(token_);
  compile.set_source(kLongLogKernel);
  compile.set_entry_point("scale");
  grpc::ClientContext context;
  v1::CompileResponse unary;
  const grpc::Status failed = stub_->Compile(&context, compile, &unary);
  ASSERT_EQ(failed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::SubmitRequest batch;
  *Add(batch, 1)->mutable_compile() = compile;
  v1::SubmitResponse replies = Submit(batch);
  ASSERT_EQ(Code(replies.replies(0)), absl::StatusCode::kInvalidArgument);
  const std::string& message = replies.replies(0).status().message();
  EXPECT_LE(message.size(), kMaxStatusMessageBytes);
  EXPECT_THAT(message, HasSubstr("more bytes cut"));
  EXPECT_EQ(message, failed.error_message());
}

TEST_F(ServiceTest, LaunchDimensionsFollowCudaAndTheDevice) {
  v1::CompileRequest compile;
  compile.set_session(token_);
  compile.set_source(kKernel);
  compile.set_entry_point("scale");
  grpc::ClientContext compile_context;
  v1::CompileResponse compiled;
  ASSERT_TRUE(stub_->Compile(&compile_context, compile, &compiled).ok());

  v1::SubmitRequest batch;
  v1::AllocateRequest* allocate = Add(batch, 1)->mutable_allocate();
  allocate->set_session(token_);
  allocate->set_size_bytes(64);
  v1::LaunchRequest* launch = Add(batch, 2)->mutable_launch();
  launch->set_session(token_);
  launch->set_kernel_id(compiled.kernel_id());
  launch->mutable_grid()->set_x(4);    // y and z unset: 1
  launch->mutable_block()->set_x(16);
  launch->add_args()->mutable_buffer()->set_buffer_ref(1);
  launch->add_args()->mutable_scalar()->set_i32(16);
  v1::LaunchRequest* too_big = Add(batch, 3)->mutable_launch();
  *too_big = *launch;
  too_big->mutable_grid()->set_y(65536);
  v1::LaunchRequest* bad_access = Add(batch, 4)->mutable_launch();
  *bad_access = *launch;
  bad_access->mutable_args(0)->mutable_buffer()->set_access(static_cast<v1::Access>(99));
  v1::LaunchRequest* bad_kernel = Add(batch, 5)->mutable_launch();
  *bad_kernel = *launch;
  bad_kernel->set_kernel_id(std::string(compiled.kernel_id().size(), 'z'));
  v1::SubmitResponse replies = Submit(batch);
  ASSERT_EQ(Code(replies.replies(1)), absl::StatusCode::kOk)
      << replies.replies(1).status().message();
  EXPECT_EQ(Code(replies.replies(2)), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(replies.replies(2).status().message(), HasSubstr("exceeds the device's limit"));
  EXPECT_EQ(Code(replies.replies(3)), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(replies.replies(3).status().message(), HasSubstr("access 99"));
  EXPECT_EQ(Code(replies.replies(4)), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(replies.replies(4).status().message(), HasSubstr("kernel_id is not one"));

  // The same through the unary RPC.
  grpc::ClientContext unary_context;
  v1::LaunchResponse launched;
  too_big->mutable_args(0)->mutable_buffer()->set_buffer(replies.replies(0).allocate().buffer());
  grpc::Status unary = stub_->Launch(&unary_context, *too_big, &launched);
  EXPECT_EQ(unary.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unary.error_message(), HasSubstr("exceeds the device's limit"));

  std::vector<KernelLaunch> launches = OnDevice<std::vector<KernelLaunch>>(
      core_->worker(0), kNoSession, [this](CommandInterface&) { return fake_->launches(); });
  ASSERT_EQ(launches.size(), 1u);
  const KernelLaunch& ran = launches[0];
  EXPECT_EQ(ran.grid.volume(), 4u);
  EXPECT_EQ(ran.block.volume(), 16u);
  EXPECT_EQ(ran.args[0].buffer, replies.replies(0).allocate().buffer());
}

// The in-process channel proves nobody's identity: its caller owns no session (its
// sessions count against their client name) and lists none, though one is open.
TEST_F(ServiceTest, AnAnonymousCallerListsNoSessions) {
  grpc::ClientContext context;
  v1::ListSessionsResponse listed;
  ASSERT_TRUE(stub_->ListSessions(&context, v1::ListSessionsRequest(), &listed).ok());
  EXPECT_EQ(listed.caller(), "");
  EXPECT_FALSE(listed.all_clients());
  EXPECT_EQ(listed.sessions_size(), 0);
  EXPECT_EQ(core_->sessions().size(), 1u);
  EXPECT_EQ(core_->sessions().Snapshot().front().owner, "");
}

TEST_F(ServiceTest, ReferencesOutsideABatchAreInvalid) {
  grpc::ClientContext context;
  v1::FreeRequest free;
  free.set_session(token_);
  free.set_buffer_ref(1);
  v1::FreeResponse freed;
  grpc::Status status = stub_->Free(&context, free, &freed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("names no earlier Allocate"));
}

TEST_F(ServiceTest, ManyClientsMixUnaryCallsBatchesAndLeases) {
  constexpr int kClients = 6;
  constexpr int kRounds = 20;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([this, c] {
      std::string token = OpenSession();
      grpc::ClientContext lease_context;
      auto lease = stub_->KeepAlive(&lease_context);
      v1::KeepAliveRequest hello;
      hello.set_session(token);
      v1::KeepAliveResponse ack;
      EXPECT_TRUE(lease->Write(hello));
      EXPECT_TRUE(lease->Read(&ack));
      for (int round = 0; round < kRounds; ++round) {
        std::string data(16, static_cast<char>('a' + c));
        v1::SubmitRequest batch;
        v1::AllocateRequest* allocate = Add(batch, 1)->mutable_allocate();
        allocate->set_session(token);
        allocate->set_size_bytes(data.size());
        v1::WriteRequest* write = Add(batch, 2)->mutable_write();
        write->mutable_header()->set_session(token);
        write->mutable_header()->set_buffer_ref(1);
        write->mutable_header()->set_inline_size_bytes(data.size());
        write->set_data(data);
        v1::SubmitResponse replies = Submit(batch);
        uint64_t buffer = replies.replies(0).allocate().buffer();
        grpc::ClientContext read_context;
        v1::ReadRequest read;
        read.set_session(token);
        read.set_buffer(buffer);
        read.set_size_bytes(data.size());
        auto reader = stub_->Read(&read_context, read);
        v1::ReadResponse chunk;
        std::string back;
        while (reader->Read(&chunk)) back += chunk.data();
        EXPECT_TRUE(reader->Finish().ok());
        EXPECT_EQ(back, data);
        grpc::ClientContext free_context;
        v1::FreeRequest free;
        free.set_session(token);
        free.set_buffer(buffer);
        v1::FreeResponse freed;
        EXPECT_TRUE(stub_->Free(&free_context, free, &freed).ok());
      }
      lease->WritesDone();
      EXPECT_TRUE(lease->Finish().ok());
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(core_->worker(0).usage().memory_used_bytes, 0u);
}

}  // namespace
}  // namespace gpucmd
