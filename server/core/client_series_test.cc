#include "server/core/client_series.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ClientSeriesTest, NamesKeepTheirLabelUpToTheLimitThenCountAsOther) {
  ClientSeries series(2);
  std::vector<std::string> evicted;
  EXPECT_EQ(series.LabelFor("a", &evicted), "a");
  EXPECT_EQ(series.LabelFor("b", &evicted), "b");
  series.SetOpenClients({"a", "b"});
  EXPECT_EQ(series.LabelFor("c", &evicted), ClientSeries::kOther) << "every label is in use";
  EXPECT_EQ(series.LabelFor("a", &evicted), "a");
  EXPECT_EQ(series.LabelFor("other", &evicted), ClientSeries::kOther);
  EXPECT_THAT(evicted, IsEmpty());
}

TEST(ClientSeriesTest, ANameWithNoSessionLeftGivesItsLabelUpLeastRecentlyActiveFirst) {
  ClientSeries series(2);
  std::vector<std::string> evicted;
  series.LabelFor("a", &evicted);
  series.LabelFor("b", &evicted);
  series.LabelFor("a", &evicted);  // b is now the least recently active
  series.SetOpenClients({});
  EXPECT_EQ(series.LabelFor("c", &evicted), "c");
  EXPECT_THAT(evicted, ElementsAre("b"));
  series.SetOpenClients({"a", "c"});
  EXPECT_EQ(series.LabelFor("d", &evicted), ClientSeries::kOther);
  EXPECT_THAT(evicted, ElementsAre("b"));
}

TEST(ClientSeriesTest, NamesActiveSinceTheLastSnapshotKeepTheirLabel) {
  ClientSeries series(2);
  std::vector<std::string> evicted;
  series.SetOpenClients({});
  series.LabelFor("a", &evicted);
  series.LabelFor("b", &evicted);  // both may have opened sessions the snapshot missed
  EXPECT_EQ(series.LabelFor("c", &evicted), ClientSeries::kOther);
  EXPECT_THAT(evicted, IsEmpty());
  series.SetOpenClients({"b"});  // a's session ended
  EXPECT_EQ(series.LabelFor("c", &evicted), "c");
  EXPECT_THAT(evicted, ElementsAre("a"));
}

}  // namespace
}  // namespace gpucmd
