#include "server/core/inline_budget.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(InlineBudgetTest, ASessionHoldsAtMostItsLimitAndGetsItBackAsWritesEnd) {
  InlineBudget budget(100);
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

TEST(InlineBudgetTest, ZeroMeansNoLimit) {
  InlineBudget budget(0);
  EXPECT_TRUE(budget.Reserve(1, uint64_t{1} << 40).ok());
}

}  // namespace
}  // namespace gpucmd
