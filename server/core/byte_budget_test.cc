#include "server/core/byte_budget.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(ByteBudgetTest, HoldersTogetherHoldAtMostTheLimitAndGetItBackWhenTheyLetGo) {
  ByteBudget budget(100, "limits.example_bytes", "examples");
  absl::StatusOr<ByteBudget::Reservation> first = budget.Reserve(60, "the first");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<ByteBudget::Reservation> too_much = budget.Reserve(41, "the second");
  EXPECT_EQ(too_much.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(too_much.status().message(),
            "examples hold 60 bytes in the daemon; the second's 41 more would pass "
            "limits.example_bytes (100)");
  EXPECT_EQ(budget.held(), 60u) << "a refusal reserves nothing";
  {
    absl::StatusOr<ByteBudget::Reservation> rest = budget.Reserve(40, "the rest");
    ASSERT_TRUE(rest.ok());
    EXPECT_EQ(budget.held(), 100u);
  }
  EXPECT_EQ(budget.held(), 60u);
  ByteBudget::Reservation moved = *std::move(first);
  EXPECT_EQ(budget.held(), 60u) << "a moved reservation is held once";
  EXPECT_EQ(moved.bytes(), 60u);
  EXPECT_FALSE(budget.Reserve(UINT64_MAX, "everything").ok()) << "no overflow";
  moved = *budget.Reserve(1, "a byte");
  EXPECT_EQ(budget.held(), 1u) << "assigning over a reservation gives back what it held";
}

// Many threads reserving and letting go at once never hold more than the limit together,
// and leave nothing held.
TEST(ByteBudgetTest, ConcurrentHoldersNeverPassTheLimit) {
  constexpr uint64_t kLimit = 1000;
  ByteBudget budget(kLimit, "limits.example_bytes", "examples");
  std::atomic<uint64_t> granted_at_once{0};
  std::atomic<bool> passed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        const uint64_t bytes = 1 + static_cast<uint64_t>((i * 7 + t) % 300);
        absl::StatusOr<ByteBudget::Reservation> held = budget.Reserve(bytes, "one");
        if (!held.ok()) continue;
        if (granted_at_once.fetch_add(bytes) + bytes > kLimit) passed = true;
        granted_at_once.fetch_sub(bytes);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(passed.load());
  EXPECT_EQ(budget.held(), 0u);
}

}  // namespace
}  // namespace gpucmd
