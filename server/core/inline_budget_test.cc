#include "server/core/inline_budget.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(InlineBudgetTest, ASessionHoldsAtMostItsLimitAndGetsItBackAsWritesEnd) {
  InlineBudget budget(100, 0);
  absl::StatusOr<InlineBudget::Reservation> first = budget.Reserve(1, 60);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<InlineBudget::Reservation> too_much = budget.Reserve(1, 41);
  EXPECT_EQ(too_much.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_much.status().message()),
              ::testing::HasSubstr("limits.max_inline_bytes_per_session"));
  EXPECT_TRUE(budget.Reserve(2, 100).ok()) << "another session has its own";
  {
    absl::StatusOr<InlineBudget::Reservation> rest = budget.Reserve(1, 40);
    ASSERT_TRUE(rest.ok());
    EXPECT_EQ(budget.HeldBy(1), 100u);
  }
  EXPECT_EQ(budget.HeldBy(1), 60u);
  InlineBudget::Reservation moved = *std::move(first);
  EXPECT_EQ(budget.HeldBy(1), 60u) << "a moved reservation is held once";
  EXPECT_FALSE(budget.Reserve(1, UINT64_MAX).ok()) << "no overflow";
}

// Sessions each within their own limit together hold at most the daemon's, and get it
// back as their writes and reads end.
TEST(InlineBudgetTest, AllSessionsTogetherHoldAtMostTheDaemonsLimit) {
  InlineBudget budget(100, 250);
  absl::StatusOr<InlineBudget::Reservation> first = budget.Reserve(1, 100);
  absl::StatusOr<InlineBudget::Reservation> second = budget.Reserve(2, 100);
  ASSERT_TRUE(first.ok() && second.ok());
  absl::StatusOr<InlineBudget::Reservation> third = budget.Reserve(3, 51);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "the writes and reads of all sessions hold 200 inline bytes; 51 more would pass "
            "the daemon's limit (limits.max_inline_bytes)");
  EXPECT_EQ(budget.HeldBy(3), 0u) << "a refusal holds nothing";
  EXPECT_EQ(budget.HeldByAll(), 200u);
  absl::StatusOr<InlineBudget::Reservation> fits = budget.Reserve(3, 50);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(budget.HeldByAll(), 250u);
  first = absl::CancelledError("given back");
  EXPECT_EQ(budget.HeldByAll(), 150u);
  EXPECT_TRUE(budget.Reserve(3, 50).ok()) << "room again once a session let go";
  EXPECT_EQ(budget.HeldByAll(), 150u);
}

TEST(InlineBudgetTest, ZeroMeansNoLimit) {
  InlineBudget budget(0, 0);
  EXPECT_TRUE(budget.Reserve(1, uint64_t{1} << 40).ok());
  EXPECT_TRUE(budget.Reserve(2, uint64_t{1} << 40).ok());
}

}  // namespace
}  // namespace gpucmd
