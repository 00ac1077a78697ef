#include "server/rpc/submit_replies.h"

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "server/rpc/raw_messages.h"
#include "server/rpc/read_chunks.h"

namespace gpucmd {
namespace {

std::vector<grpc::Slice> SlicesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  return slices;
}

std::string WireOf(const grpc::ByteBuffer& buffer) {
  std::string wire;
  for (const grpc::Slice& slice : SlicesOf(buffer)) {
    wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return wire;
}

v1::SubmitResponse Parsed(const grpc::ByteBuffer& buffer) {
  grpc::ByteBuffer copy = buffer;
  v1::SubmitResponse parsed;
  EXPECT_TRUE(ParseRequest(&copy, &parsed).ok());
  return parsed;
}

// Replies of several kinds: a read's bytes, a failure with its message, an allocate.
v1::SubmitResponse SomeReplies() {
  v1::SubmitResponse replies;
  v1::CommandReply* read = replies.add_replies();
  read->set_sequence(7);
  read->mutable_read()->set_data(std::string(300, 'r'));
  v1::CommandReply* failed = replies.add_replies();
  failed->set_sequence(8);
  failed->mutable_status()->set_code(5);
  failed->mutable_status()->set_message("buffer 3 not found");
  v1::CommandReply* allocated = replies.add_replies();
  allocated->set_sequence(1u << 31);
  allocated->mutable_allocate()->set_buffer(42);
  replies.add_replies()->set_sequence(9);  // an empty reply: a launch's
  return replies;
}

TEST(SubmitRepliesTest, AllRepliesSerializeAsTheResponseItself) {
  v1::SubmitResponse replies = SomeReplies();
  for (bool batch_done : {false, true}) {
    replies.set_batch_done(batch_done);
    EXPECT_EQ(WireOf(SerializeReplies({replies, {}}, 0, replies.replies_size(), batch_done)),
              replies.SerializeAsString());
  }
}

TEST(SubmitRepliesTest, ARunOfRepliesParsesBackToThoseReplies) {
  const v1::SubmitResponse replies = SomeReplies();
  v1::SubmitResponse parsed = Parsed(SerializeReplies({replies, {}}, 1, 3, /*batch_done=*/true));
  ASSERT_EQ(parsed.replies_size(), 2);
  EXPECT_EQ(parsed.replies(0).SerializeAsString(), replies.replies(1).SerializeAsString());
  EXPECT_EQ(parsed.replies(1).SerializeAsString(), replies.replies(2).SerializeAsString());
  EXPECT_TRUE(parsed.batch_done());

  v1::SubmitResponse done = Parsed(SerializeReplies({replies, {}}, 4, 4, /*batch_done=*/true));
  EXPECT_EQ(done.replies_size(), 0);
  EXPECT_TRUE(done.batch_done());
}

// `size` bytes of fresh memory counting up from `seed`, shared as a read's are.
std::shared_ptr<const Bytes> ReadBytes(size_t size, int seed) {
  Bytes bytes = Bytes::Uninitialized(size);
  for (size_t i = 0; i < size; ++i) bytes.data()[i] = static_cast<std::byte>(seed + i * 7);
  return ShareReadBytes(std::move(bytes), nullptr);
}

std::string StringOf(const Bytes& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Replies whose reads' bytes are sent from them: none, few (copied) and many (shared),
// between other replies; and the same replies with the bytes inside, as protobuf has them.
struct RepliesWithReads {
  v1::SubmitResponse replies;
  std::vector<std::shared_ptr<const Bytes>> read_bytes;
  v1::SubmitResponse expected;

  RepliesWithReads() {
    const std::vector<size_t> read_sizes = {0, 300, kSharedChunkMinBytes, 3 * kSharedChunkMinBytes};
    for (size_t i = 0; i < read_sizes.size(); ++i) {
      v1::CommandReply* read = replies.add_replies();
      read->set_sequence(2 * i + 1);
      read_bytes.push_back(ReadBytes(read_sizes[i], static_cast<int>(i)));
      v1::CommandReply* launch = replies.add_replies();
      launch->set_sequence(2 * i + 2);
      launch->mutable_launch();
      read_bytes.push_back(nullptr);
    }
    expected = replies;
    for (size_t i = 0; i < read_bytes.size(); ++i) {
      if (read_bytes[i] == nullptr) continue;
      v1::ReadResponse* read = expected.mutable_replies(static_cast<int>(i))->mutable_read();
      read->set_total_bytes(read_bytes[i]->size());
      read->set_data(StringOf(*read_bytes[i]));
    }
  }
};

TEST(SubmitRepliesTest, ReadsSentFromTheirBytesParseAsRepliesHoldingThem) {
  RepliesWithReads batch;
  for (bool batch_done : {false, true}) {
    batch.expected.set_batch_done(batch_done);
    v1::SubmitResponse parsed =
        Parsed(SerializeReplies({batch.replies, batch.read_bytes}, 0,
                                batch.read_bytes.size(), batch_done));
    EXPECT_EQ(parsed.SerializeAsString(), batch.expected.SerializeAsString());
    EXPECT_TRUE(parsed.replies(0).has_read()) << "an empty read still answers `read`";
  }
  v1::SubmitResponse run = Parsed(SerializeReplies({batch.replies, batch.read_bytes}, 3, 7,
                                                   /*batch_done=*/false));
  ASSERT_EQ(run.replies_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(run.replies(i).SerializeAsString(),
              batch.expected.replies(3 + i).SerializeAsString());
  }
}

TEST(SubmitRepliesTest, ManyReadBytesAreSharedFewAreCopied) {
  RepliesWithReads batch;
  const Bytes& few = *batch.read_bytes[2];
  const Bytes& many = *batch.read_bytes[6];
  ASSERT_FALSE(SentShared(few, few.size()));
  ASSERT_TRUE(SentShared(many, many.size()));
  std::weak_ptr<const Bytes> many_alive = batch.read_bytes[6];
  auto message = std::make_unique<grpc::ByteBuffer>(SerializeReplies(
      {batch.replies, batch.read_bytes}, 0, batch.read_bytes.size(), /*batch_done=*/true));
  int sharing = 0;
  for (const grpc::Slice& slice : SlicesOf(*message)) {
    const void* begin = slice.begin();
    EXPECT_NE(begin, few.data()) << "a few bytes are copied into the message";
    if (begin == many.data() || begin == batch.read_bytes[4]->data()) {
      ++sharing;
      EXPECT_EQ(slice.size(), begin == many.data() ? many.size() : kSharedChunkMinBytes);
    }
  }
  EXPECT_EQ(sharing, 2) << "each read of many bytes is sent from them";

  batch.read_bytes.clear();
  EXPECT_FALSE(many_alive.expired()) << "the message holds the bytes it shares";
  message.reset();
  EXPECT_TRUE(many_alive.expired());
}

TEST(SubmitRepliesTest, RunsFitTheMessageAndHoldAtLeastOneReply) {
  v1::SubmitResponse replies;
  for (int i = 0; i < 5; ++i) {
    v1::CommandReply* reply = replies.add_replies();
    reply->set_sequence(i + 1);  // all of one size
    reply->mutable_read()->set_data(std::string(100, 'x'));
  }
  const uint64_t one = replies.replies(0).ByteSizeLong() + 2;  // tag and length: 1 byte each
  EXPECT_EQ(RepliesThatFit({replies, {}}, 0, 5, 2 * one), 2u);
  EXPECT_EQ(RepliesThatFit({replies, {}}, 0, 5, 2 * one - 1), 1u);
  EXPECT_EQ(RepliesThatFit({replies, {}}, 3, 5, 10 * one), 5u);
  EXPECT_EQ(RepliesThatFit({replies, {}}, 1, 5, 1), 2u)
      << "a reply larger than a message goes alone";
  EXPECT_EQ(RepliesThatFit({replies, {}}, 5, 5, one), 5u);
  // Every run of them, serialized, is no larger than the limit it was cut to.
  for (size_t begin = 0; begin < 5;) {
    const size_t end = RepliesThatFit({replies, {}}, begin, 5, 3 * one);
    EXPECT_LE(WireOf(SerializeReplies({replies, {}}, begin, end, false)).size(), 3 * one);
    begin = end;
  }
}

TEST(SubmitRepliesTest, RunsCountTheReadBytesSentFromThemselves) {
  RepliesWithReads batch;
  const RepliesToSend replies{batch.replies, batch.read_bytes};
  const size_t count = batch.read_bytes.size();
  // The largest reply alone: every run of the rest fits, and is cut where the next one
  // would not.
  const uint64_t limit = WireOf(SerializeReplies(replies, 6, 7, false)).size();
  for (size_t begin = 0; begin < count;) {
    const size_t end = RepliesThatFit(replies, begin, count, limit);
    const size_t size = WireOf(SerializeReplies(replies, begin, end, false)).size();
    EXPECT_LE(size, limit) << begin;
    if (end < count) {
      EXPECT_GT(WireOf(SerializeReplies(replies, begin, end + 1, false)).size(), limit) << begin;
    }
    begin = end;
  }
}

}  // namespace
}  // namespace gpucmd
