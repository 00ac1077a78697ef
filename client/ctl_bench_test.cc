#include "client/ctl_bench.h"

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<BenchRow> kRows = {
    {.what = "idle Synchronize, median", .value = 81.5, .unit = "us"},
    {.what = "shared-memory write, 16.0 MiB",
     .unit = "GB/s",
     .not_measured = "the session holds 0 \"regions\",\n its limit\t(x)"},
};

TEST(FormatBenchTest, TheTableSaysWhyAFigureWasNotMeasured) {
  const std::string table = FormatBench(kRows, /*json=*/false);
  EXPECT_THAT(table, HasSubstr("idle Synchronize, median"));
  EXPECT_THAT(table, HasSubstr("81.5 us"));
  EXPECT_THAT(table, HasSubstr("not measured (the session holds 0"));
  EXPECT_THAT(table, Not(HasSubstr(" 0 GB/s"))) << "no figure for a row not measured";
}

TEST(FormatBenchTest, JsonParsesWithANullForAFigureNotMeasured) {
  const std::string json = FormatBench(kRows, /*json=*/true);
  google::protobuf::ListValue parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  ASSERT_EQ(parsed.values_size(), 2);
  const auto& measured = parsed.values(0).struct_value().fields();
  EXPECT_EQ(measured.at("what").string_value(), "idle Synchronize, median");
  EXPECT_EQ(measured.at("value").number_value(), 81.5);
  EXPECT_EQ(measured.at("unit").string_value(), "us");
  EXPECT_FALSE(measured.contains("not_measured"));
  const auto& refused = parsed.values(1).struct_value().fields();
  EXPECT_TRUE(refused.at("value").has_null_value());
  EXPECT_EQ(refused.at("not_measured").string_value(), kRows[1].not_measured);
}

}  // namespace
}  // namespace gpucmd
