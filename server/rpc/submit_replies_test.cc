#include "server/rpc/submit_replies.h"

#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "server/rpc/raw_messages.h"

namespace gpucmd {
namespace {

std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
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
    EXPECT_EQ(Bytes(SerializeReplies(replies, 0, replies.replies_size(), batch_done)),
              replies.SerializeAsString());
  }
}

TEST(SubmitRepliesTest, ARunOfRepliesParsesBackToThoseReplies) {
  const v1::SubmitResponse replies = SomeReplies();
  grpc::ByteBuffer serialized = SerializeReplies(replies, 1, 3, /*batch_done=*/true);
  v1::SubmitResponse parsed;
  ASSERT_TRUE(ParseRequest(&serialized, &parsed).ok());
  ASSERT_EQ(parsed.replies_size(), 2);
  EXPECT_EQ(parsed.replies(0).SerializeAsString(), replies.replies(1).SerializeAsString());
  EXPECT_EQ(parsed.replies(1).SerializeAsString(), replies.replies(2).SerializeAsString());
  EXPECT_TRUE(parsed.batch_done());

  grpc::ByteBuffer only_done = SerializeReplies(replies, 4, 4, /*batch_done=*/true);
  v1::SubmitResponse done;
  ASSERT_TRUE(ParseRequest(&only_done, &done).ok());
  EXPECT_EQ(done.replies_size(), 0);
  EXPECT_TRUE(done.batch_done());
}

TEST(SubmitRepliesTest, RunsFitTheMessageAndHoldAtLeastOneReply) {
  v1::SubmitResponse replies;
  for (int i = 0; i < 5; ++i) {
    v1::CommandReply* reply = replies.add_replies();
    reply->set_sequence(i + 1);  // all of one size
    reply->mutable_read()->set_data(std::string(100, 'x'));
  }
  const uint64_t one = replies.replies(0).ByteSizeLong() + 2;  // tag and length: 1 byte each
  EXPECT_EQ(RepliesThatFit(replies, 0, 5, 2 * one), 2u);
  EXPECT_EQ(RepliesThatFit(replies, 0, 5, 2 * one - 1), 1u);
  EXPECT_EQ(RepliesThatFit(replies, 3, 5, 10 * one), 5u);
  EXPECT_EQ(RepliesThatFit(replies, 1, 5, 1), 2u) << "a reply larger than a message goes alone";
  EXPECT_EQ(RepliesThatFit(replies, 5, 5, one), 5u);
  // Every run of them, serialized, is no larger than the limit it was cut to.
  for (size_t begin = 0; begin < 5;) {
    const size_t end = RepliesThatFit(replies, begin, 5, 3 * one);
    EXPECT_LE(Bytes(SerializeReplies(replies, begin, end, false)).size(), 3 * one);
    begin = end;
  }
}

}  // namespace
}  // namespace gpucmd
