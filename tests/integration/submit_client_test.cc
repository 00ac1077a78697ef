// The C++ client's Submit stream through the real daemon: batches of writes, launches,
// copies, reads and synchronizes in one round trip, several in flight, answered in
// order; failed commands answered in place while the rest run; batches the daemon would
// refuse refused before they are sent; a call the daemon ends reported by Receive.

#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/client.h"
#include "client/submit_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::DaemonProcess;
using ::testing::HasSubstr;

constexpr int kMaxMessageBytes = 1 << 20;
// The least the daemon takes (four messages): a batch of 16384 commands holds more.
constexpr uint64_t kMaxSubmitBytes = 4 * kMaxMessageBytes;
constexpr int kInts = 1024;

constexpr char kAddOne[] = R"CUDA(
extern "C" __global__ void add_one(int* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1;
}
)CUDA";

std::string IntBytes(const std::vector<int>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int));
}

std::vector<int> IntsOf(const std::string& bytes) {
  std::vector<int> values(bytes.size() / sizeof(int));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(int));
  return values;
}

// The README's example, as it is there.
// `kernel` takes one int* and adds one to each int of 4 blocks of 256 threads.
absl::StatusOr<std::string> Batched(gpucmd::Session& session, const gpucmd::Buffer& x,
                                    const std::string& kernel) {
  gpucmd::SubmitBatch batch(session);
  batch.Write(x, 0, std::string(4096, '\0'));
  batch.Launch(kernel, {gpucmd::MakeDim3(4), gpucmd::MakeDim3(256)},
               {gpucmd::BufferArgument(x, gpucmd::v1::ACCESS_READ_WRITE)});
  const size_t read = batch.Read(x, 0, 4096);
  ASSIGN_OR_RETURN(gpucmd::SubmitStream stream, gpucmd::SubmitStream::Open(session));
  RETURN_IF_ERROR(stream.Send(batch));  // send more before receiving, if you like
  ASSIGN_OR_RETURN(gpucmd::BatchReplies replies, stream.Receive());
  RETURN_IF_ERROR(replies.FirstError());  // or replies.status(i) per command
  return replies.read_bytes(read);        // 1024 ints of 1
}

class SubmitClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(
        absl::StrCat("limits { max_message_bytes: ", kMaxMessageBytes,
                     " max_submit_bytes: ", kMaxSubmitBytes, " }\n"));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    ClientOptions options;
    options.max_message_bytes = kMaxMessageBytes;
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(daemon_->grpc_target(), options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    absl::StatusOr<Session> session = client_->OpenSession(0, "submit-client-test");
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(*std::move(session));
    absl::StatusOr<v1::CompileResponse> compiled = session_->Compile(kAddOne, "add_one");
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    add_one_ = compiled->kernel_id();
    absl::StatusOr<Buffer> buffer = session_->Allocate(kInts * sizeof(int));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffer_.emplace(*std::move(buffer));
  }

  void TearDown() override {
    buffer_.reset();
    session_.reset();
    client_.reset();
  }

  SubmitStream MustOpen() {
    absl::StatusOr<SubmitStream> stream = SubmitStream::Open(*session_);
    EXPECT_TRUE(stream.ok()) << stream.status();
    return *std::move(stream);
  }

  // Runs `batch` on a stream of its own: the ints its read at `read` brought back (none
  // when the batch or one of its commands failed, which fails the test).
  std::vector<int> RunAndReadInts(const SubmitBatch& batch, size_t read) {
    SubmitStream stream = MustOpen();
    absl::StatusOr<BatchReplies> replies = stream.Run(batch);
    EXPECT_TRUE(replies.ok()) << replies.status();
    if (!replies.ok()) return {};
    EXPECT_TRUE(replies->FirstError().ok()) << replies->FirstError();
    return IntsOf(replies->read_bytes(read));
  }

  // Zeroes the buffer; then `batch` adds one to each of its ints and reads them back.
  // Returns the read's place in the batch.
  size_t ZeroedThenAddOneAndRead(SubmitBatch& batch) {
    EXPECT_TRUE(session_->Write(*buffer_, 0, IntBytes(std::vector<int>(kInts, 0))).ok());
    return AddOneAndRead(batch);
  }

  // Adds one to every int of the buffer, then reads them back: returns the read's place.
  size_t AddOneAndRead(SubmitBatch& batch) {
    batch.Launch(add_one_, {MakeDim3(kInts / 256), MakeDim3(256)},
                 {BufferArgument(*buffer_, v1::ACCESS_READ_WRITE), Int32Argument(kInts)});
    return batch.Read(*buffer_, 0, kInts * sizeof(int));
  }

  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::optional<Session> session_;
  std::string add_one_;
  std::optional<Buffer> buffer_;
};

TEST_F(SubmitClientTest, ABatchWritesLaunchesAndReadsInOneRoundTrip) {
  std::vector<int> values(kInts);
  for (int i = 0; i < kInts; ++i) values[i] = i * 3;
  SubmitBatch batch(*session_);
  EXPECT_EQ(batch.Write(*buffer_, 0, IntBytes(values)), 0u);
  const size_t read = AddOneAndRead(batch);
  EXPECT_EQ(read, 2u);
  EXPECT_EQ(batch.Synchronize(), 3u);
  SubmitStream stream = MustOpen();
  absl::StatusOr<BatchReplies> replies = stream.Run(batch);
  ASSERT_TRUE(replies.ok()) << replies.status();
  ASSERT_EQ(replies->size(), 4u);
  EXPECT_TRUE(replies->FirstError().ok()) << replies->FirstError();
  for (int& value : values) ++value;
  EXPECT_EQ(IntsOf(replies->read_bytes(read)), values);
  EXPECT_TRUE(replies->read_bytes(0).empty());  // not a read
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(SubmitClientTest, TheReadmeExampleRuns) {
  absl::StatusOr<v1::CompileResponse> bump = session_->Compile(R"CUDA(
      extern "C" __global__ void bump(int* data) {
        data[blockIdx.x * blockDim.x + threadIdx.x] += 1;
      }
      )CUDA",
                                                               "bump");
  ASSERT_TRUE(bump.ok()) << bump.status();
  absl::StatusOr<std::string> bytes = Batched(*session_, *buffer_, bump->kernel_id());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(IntsOf(*bytes), std::vector<int>(kInts, 1));
}

TEST_F(SubmitClientTest, BatchesInFlightAreAnsweredInTheOrderSent) {
  SubmitBatch batch(*session_);
  const size_t read = ZeroedThenAddOneAndRead(batch);
  SubmitStream stream = MustOpen();
  constexpr int kInFlight = 4;
  for (int i = 0; i < kInFlight; ++i) ASSERT_TRUE(stream.Send(batch).ok());
  for (int i = 1; i <= kInFlight; ++i) {
    absl::StatusOr<BatchReplies> replies = stream.Receive();
    ASSERT_TRUE(replies.ok()) << replies.status();
    EXPECT_EQ(IntsOf(replies->read_bytes(read)), std::vector<int>(kInts, i)) << "batch " << i;
  }
  EXPECT_EQ(stream.Receive().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SubmitClientTest, AnEmptyBatchIsAnsweredWithNoReplies) {
  SubmitStream stream = MustOpen();
  absl::StatusOr<BatchReplies> replies = stream.Run(SubmitBatch(*session_));
  ASSERT_TRUE(replies.ok()) << replies.status();
  EXPECT_EQ(replies->size(), 0u);
  EXPECT_TRUE(replies->FirstError().ok());
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(SubmitClientTest, AnswersSpreadOverSeveralMessagesComeBackAsOneBatch) {
  constexpr uint64_t kReadBytes = 384 << 10;  // three take more than one message
  absl::StatusOr<Buffer> large = session_->Allocate(3 * kReadBytes);
  ASSERT_TRUE(large.ok()) << large.status();
  std::string bytes(3 * kReadBytes, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_TRUE(session_->Write(*large, 0, bytes).ok());
  SubmitBatch batch(*session_);
  for (uint64_t part = 0; part < 3; ++part) batch.Read(*large, part * kReadBytes, kReadBytes);
  batch.Synchronize();
  SubmitStream stream = MustOpen();
  absl::StatusOr<BatchReplies> replies = stream.Run(batch);
  ASSERT_TRUE(replies.ok()) << replies.status();
  ASSERT_EQ(replies->size(), 4u);
  for (uint64_t part = 0; part < 3; ++part) {
    EXPECT_TRUE(replies->read_bytes(part) == bytes.substr(part * kReadBytes, kReadBytes))
        << "part " << part;
  }
  EXPECT_TRUE(replies->status(3).ok()) << replies->status(3);
}

TEST_F(SubmitClientTest, OneThreadSendsWhileAnotherReceives) {
  SubmitBatch batch(*session_);
  const size_t read = ZeroedThenAddOneAndRead(batch);
  SubmitStream stream = MustOpen();
  constexpr int kBatches = 40;
  std::thread sender([&] {
    for (int i = 0; i < kBatches; ++i) ASSERT_TRUE(stream.Send(batch).ok());
  });
  for (int i = 1; i <= kBatches; ++i) {
    absl::StatusOr<BatchReplies> replies;
    do {  // until the sender has sent the batch this waits for
      replies = stream.Receive();
    } while (replies.status().code() == absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE(replies.ok()) << replies.status();
    EXPECT_EQ(IntsOf(replies->read_bytes(read))[0], i);
  }
  sender.join();
}

TEST_F(SubmitClientTest, AFailedCommandIsAnsweredInPlaceAndTheOthersRun) {
  absl::StatusOr<Buffer> freed = session_->Allocate(64);
  ASSERT_TRUE(freed.ok()) << freed.status();
  SubmitBatch batch(*session_);
  batch.Write(*buffer_, 0, IntBytes(std::vector<int>(kInts, 7)));
  const size_t gone = batch.Read(*freed, 0, 64);
  const size_t past_the_end = batch.Read(*buffer_, kInts * sizeof(int) - 4, 8);
  const size_t read = batch.Read(*buffer_, 0, kInts * sizeof(int));
  ASSERT_TRUE(freed->Free().ok());
  SubmitStream stream = MustOpen();
  absl::StatusOr<BatchReplies> replies = stream.Run(batch);
  ASSERT_TRUE(replies.ok()) << replies.status();
  EXPECT_EQ(replies->status(gone).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(replies->status(past_the_end).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(replies->status(read).ok()) << replies->status(read);
  EXPECT_EQ(IntsOf(replies->read_bytes(read)), std::vector<int>(kInts, 7));
  EXPECT_EQ(replies->FirstError().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(replies->FirstError().message(), HasSubstr("command 1 of the batch"));
  // The stream serves on.
  SubmitBatch next(*session_);
  next.Synchronize();
  absl::StatusOr<BatchReplies> after = stream.Run(next);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->FirstError().ok());
}

// A batch fills the buffer on the device (4-byte elements), a kernel adds one to each, and
// the read sees the sum; a fill that is not whole elements is refused in place.
TEST_F(SubmitClientTest, ABatchFillsOnTheDeviceBeforeItsLaunch) {
  SubmitBatch batch(*session_);
  batch.Fill(*buffer_, 0, kInts * sizeof(int), /*value=*/41, /*element_bytes=*/4);
  const size_t read = AddOneAndRead(batch);
  const size_t misaligned = batch.Fill(*buffer_, 2, 8, 0, /*element_bytes=*/4);
  SubmitStream stream = MustOpen();
  absl::StatusOr<BatchReplies> replies = stream.Run(batch);
  ASSERT_TRUE(replies.ok()) << replies.status();
  EXPECT_TRUE(replies->status(0).ok()) << replies->status(0);
  EXPECT_EQ(replies->status(misaligned).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(replies->status(misaligned).message(), HasSubstr("not multiples of 4"));
  EXPECT_EQ(IntsOf(replies->read_bytes(read)), std::vector<int>(kInts, 42));
}

// A pitched fill in a batch sets only its rows: the odd ints (each a row of one, two ints
// apart) are set before the kernel adds one to every int.
TEST_F(SubmitClientTest, ABatchFillsPitchedRows) {
  SubmitBatch batch(*session_);
  batch.Fill(*buffer_, 0, kInts * sizeof(int), /*value=*/0, /*element_bytes=*/4);
  batch.Fill(*buffer_, sizeof(int), Pitched{sizeof(int), kInts / 2, 2 * sizeof(int)},
             /*value=*/9, /*element_bytes=*/4);
  const size_t read = AddOneAndRead(batch);
  std::vector<int> expected(kInts);
  for (int i = 0; i < kInts; ++i) expected[i] = i % 2 == 1 ? 10 : 1;
  EXPECT_EQ(RunAndReadInts(batch, read), expected);
}

// Each even int copied onto the odd one after it: rows of one int, two apart, within one
// buffer, after the batch's write and before its launch.
TEST_F(SubmitClientTest, ABatchCopiesPitchedRows) {
  std::vector<int> values(kInts);
  std::iota(values.begin(), values.end(), 0);
  SubmitBatch batch(*session_);
  batch.Write(*buffer_, 0, IntBytes(values));
  batch.Copy(*buffer_, 0, *buffer_, sizeof(int),
             CopyRows{sizeof(int), kInts / 2, 2 * sizeof(int), 2 * sizeof(int)});
  const size_t read = AddOneAndRead(batch);
  std::vector<int> expected(kInts);
  for (int i = 0; i < kInts; ++i) expected[i] = i - i % 2 + 1;
  EXPECT_EQ(RunAndReadInts(batch, read), expected);
}

// Packed rows written into the middle two ints of every four, then the whole buffer and
// those rows read back, all in one batch; a pitched write whose bytes are not its rows is
// refused and writes nothing.
TEST_F(SubmitClientTest, ABatchWritesAndReadsPitchedRows) {
  ASSERT_TRUE(session_->Write(*buffer_, 0, IntBytes(std::vector<int>(kInts, 0))).ok());
  const Pitched middles{2 * sizeof(int), kInts / 4, 4 * sizeof(int)};
  std::vector<int> packed(kInts / 2);
  std::iota(packed.begin(), packed.end(), 100);
  SubmitBatch batch(*session_);
  batch.Write(*buffer_, sizeof(int), IntBytes(packed), /*stream=*/0, middles);
  const size_t whole = AddOneAndRead(batch);
  const size_t rows = batch.ReadPitched(*buffer_, sizeof(int), middles);
  SubmitStream stream = MustOpen();
  absl::StatusOr<BatchReplies> replies = stream.Run(batch);
  ASSERT_TRUE(replies.ok()) << replies.status();
  EXPECT_TRUE(replies->FirstError().ok()) << replies->FirstError();
  std::vector<int> expected(kInts, 1);
  std::vector<int> expected_rows(kInts / 2);
  for (int i = 0; i < kInts / 2; ++i) {
    expected[(i / 2) * 4 + 1 + i % 2] = packed[i] + 1;
    expected_rows[i] = packed[i] + 1;
  }
  EXPECT_EQ(IntsOf(replies->read_bytes(whole)), expected);
  EXPECT_EQ(IntsOf(replies->read_bytes(rows)), expected_rows);

  SubmitBatch short_rows(*session_);
  short_rows.Write(*buffer_, 0, IntBytes(std::vector<int>(kInts / 2 - 1, -1)), /*stream=*/0,
                   middles);
  replies = stream.Run(short_rows);
  ASSERT_TRUE(replies.ok()) << replies.status();
  EXPECT_EQ(replies->status(0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(replies->status(0).message(), HasSubstr("pitched write carries"));
  absl::StatusOr<std::string> after = session_->Read(*buffer_, 0, kInts * sizeof(int));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(IntsOf(*after), expected);
}

TEST_F(SubmitClientTest, ABatchTheDaemonWouldRefuseIsRefusedBeforeItIsSent) {
  SubmitStream stream = MustOpen();
  SubmitBatch too_many(*session_);
  for (int i = 0; i <= 16384; ++i) too_many.Synchronize();
  absl::Status refused = stream.Send(too_many);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("at most 16384 commands"));
  SubmitBatch too_large(*session_);
  too_large.Write(*buffer_, 0, std::string(kMaxMessageBytes, 'x'));
  refused = stream.Send(too_large);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("over the message limit"));
  EXPECT_EQ(stream.Receive().status().code(), absl::StatusCode::kFailedPrecondition);
  // Neither reached the daemon: the stream serves on.
  SubmitBatch batch(*session_);
  batch.Write(*buffer_, 0, IntBytes(std::vector<int>(kInts, 5)));
  const size_t read = batch.Read(*buffer_, 0, kInts * sizeof(int));
  absl::StatusOr<BatchReplies> replies = stream.Run(batch);
  ASSERT_TRUE(replies.ok()) << replies.status();
  EXPECT_EQ(IntsOf(replies->read_bytes(read)), std::vector<int>(kInts, 5));
}

TEST_F(SubmitClientTest, ACallTheDaemonEndsIsReportedByReceiveAndTheStreamStops) {
  SubmitStream stream = MustOpen();
  SubmitBatch first(*session_);
  first.Synchronize();
  // 16384 commands take more than the daemon's memory for batches (limits.max_submit_bytes).
  SubmitBatch over_budget(*session_);
  for (int i = 0; i < 16384; ++i) over_budget.Synchronize();
  ASSERT_TRUE(stream.Send(first).ok());
  ASSERT_TRUE(stream.Send(over_budget).ok());
  absl::StatusOr<BatchReplies> answered = stream.Receive();  // the batch before it
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_EQ(answered->size(), 1u);
  absl::StatusOr<BatchReplies> ended = stream.Receive();
  EXPECT_EQ(ended.status().code(), absl::StatusCode::kResourceExhausted) << ended.status();
  EXPECT_THAT(ended.status().message(), HasSubstr("max_submit_bytes"));
  EXPECT_EQ(stream.Send(first).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stream.Close().code(), absl::StatusCode::kFailedPrecondition);
  // The session serves on.
  EXPECT_TRUE(session_->Synchronize().ok());
}

TEST_F(SubmitClientTest, RegionSlicesCarryABatchsBytesBothWays) {
  absl::StatusOr<SharedMemoryRegion> region =
      SharedMemoryRegion::Create(*session_, 2 * kInts * sizeof(int));
  ASSERT_TRUE(region.ok()) << region.status();
  std::vector<int> values(kInts);
  for (int i = 0; i < kInts; ++i) values[i] = 1000 - i;
  std::memcpy(region->data(), values.data(), kInts * sizeof(int));
  SubmitBatch batch(*session_);
  batch.Write(*buffer_, 0, RegionSlice{*region, 0, kInts * sizeof(int)});
  AddOneAndRead(batch);  // and the bytes inline too
  batch.Read(*buffer_, 0, RegionSlice{*region, kInts * sizeof(int), kInts * sizeof(int)});
  SubmitStream stream = MustOpen();
  absl::StatusOr<BatchReplies> replies = stream.Run(batch);
  ASSERT_TRUE(replies.ok()) << replies.status();
  ASSERT_TRUE(replies->FirstError().ok()) << replies->FirstError();
  for (int& value : values) ++value;
  std::vector<int> landed(kInts);
  std::memcpy(landed.data(), region->data() + kInts * sizeof(int), kInts * sizeof(int));
  EXPECT_EQ(landed, values);
  EXPECT_EQ(IntsOf(replies->read_bytes(2)), values);
}

TEST_F(SubmitClientTest, AStreamDestroyedWithAnswersOwedEndsItsCall) {
  SubmitBatch batch(*session_);
  AddOneAndRead(batch);
  {
    SubmitStream stream = MustOpen();
    ASSERT_TRUE(stream.Send(batch).ok());
    ASSERT_TRUE(stream.Send(batch).ok());
  }  // not received
  EXPECT_TRUE(session_->Synchronize().ok());
  absl::StatusOr<std::string> bytes = session_->Read(*buffer_, 0, sizeof(int));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
}

}  // namespace
}  // namespace gpucmd
