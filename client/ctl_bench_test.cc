#include "client/ctl_bench.h"

#include "gmock/gmock.h"
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

TEST(FormatBenchTest, TheTableGivesByteRatesInAUnitTheyFill) {
  const std::vector<BenchRow> rates = {
      {.what = "fast", .value = 12.5, .unit = "GB/s"},
      {.what = "slower", .value = 0.25, .unit = "GB/s"},
      {.what = "a few bytes", .value = 1.15e-6, .unit = "GB/s"},
      {.what = "none", .value = 0, .unit = "GB/s"},
      {.what = "launches", .value = 0.5, .unit = "launches/s"},
  };
  const std::string table = FormatBench(rates, /*json=*/false);
  EXPECT_THAT(table, HasSubstr("12.5 GB/s"));
  EXPECT_THAT(table, HasSubstr("250 MB/s"));
  EXPECT_THAT(table, HasSubstr("1.15 kB/s"));
  EXPECT_THAT(table, HasSubstr("0 B/s"));
  EXPECT_THAT(table, HasSubstr("0.5 launches/s"));
  EXPECT_THAT(FormatBench(rates, /*json=*/true), HasSubstr(R"("value":1.15e-06,"unit":"GB/s")"))
      << "JSON keeps one unit per row";
}

TEST(FormatBenchTest, JsonHasANullAndTheReasonForAFigureNotMeasured) {
  // Compared whole (protobuf's Map, which parsing it back would need, is laid out
  // differently under ThreadSanitizer than in the system's library).
  EXPECT_EQ(FormatBench(kRows, /*json=*/true),
            R"json([{"what":"idle Synchronize, median","value":81.5,"unit":"us"},)json"
            R"json({"what":"shared-memory write, 16.0 MiB","value":null,"unit":"GB/s",)json"
            R"json("not_measured":"the session holds 0 \"regions\",\n its limit\t(x)"}])json"
            "\n");
}

}  // namespace
}  // namespace gpucmd
