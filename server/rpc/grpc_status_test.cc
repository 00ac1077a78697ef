#include "server/rpc/grpc_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

using ::testing::EndsWith;
using ::testing::StartsWith;

TEST(GrpcStatusTest, ShortMessagesPassUnchanged) {
  grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError("bad offset"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "bad offset");
  const std::string exactly(kMaxStatusMessageBytes, 'x');
  EXPECT_EQ(CapStatusMessage(exactly), exactly);
}

TEST(GrpcStatusTest, LongMessagesAreCutSayingHowMuch) {
  const std::string log(100000, 'e');
  grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError(log));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_THAT(status.error_message(), StartsWith("eeee"));
  EXPECT_THAT(status.error_message(),
              EndsWith(absl::StrCat("(", log.size() - (kMaxStatusMessageBytes - 64),
                                    " more bytes cut)")));
}

TEST(GrpcStatusTest, CutsNeverSplitACharacter) {
  std::string text;
  while (text.size() < 3 * kMaxStatusMessageBytes) text += "\xc3\xa9";  // é
  for (size_t shift : {0, 1}) {
    std::string capped = CapStatusMessage(std::string(shift, 'a') + text);
    const size_t kept = capped.find('\n');
    ASSERT_NE(kept, std::string::npos);
    EXPECT_EQ((kept - shift) % 2, 0u) << "a two-byte character was split";
  }
}

}  // namespace
}  // namespace gpucmd
