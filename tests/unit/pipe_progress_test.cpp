#include <gtest/gtest.h>

#include "pipe/control.hpp"
#include "pipe/progress.hpp"

namespace ratelimit::pipe {
namespace {

using namespace std::chrono_literals;

Totals totals_at(std::chrono::nanoseconds elapsed, std::uint64_t bytes) {
  Totals totals;
  totals.started = 10s;
  totals.now = 10s + elapsed;
  totals.bytes = totals.units = bytes;
  totals.rate = 1000;
  return totals;
}

TEST(Progress, SiNumbersHaveThreeSignificantDigits) {
  EXPECT_EQ(si_number(0), "0 ");
  EXPECT_EQ(si_number(999), "999 ");
  EXPECT_EQ(si_number(1234), "1.23 k");
  EXPECT_EQ(si_number(20000), "20.0 k");
  EXPECT_EQ(si_number(1.5e9), "1.50 G");
  EXPECT_EQ(clock_time(3725s), "1:02:05");
}

TEST(Progress, LineShowsAmountTimeRatesAndWithATotalTheEta) {
  ProgressMeter meter(Unit{}, 4000);
  meter.line(totals_at(0s, 0));
  EXPECT_EQ(meter.line(totals_at(1s, 1000)),
            "1.00 kB 0:00:01 [1.00 kB/s] [avg 1.00 kB/s] [=====>              ]  25% ETA 0:00:03");
}

TEST(Progress, AnEtaBeyondWhatNanosecondsHoldSaturates) {
  ProgressMeter meter(Unit{}, 1'000'000'000'000'000'000);
  meter.line(totals_at(0s, 0));
  // About 3e13 years left: shown as the longest time there is, not as 0:00:00.
  const std::string line = meter.line(totals_at(1000s, 1));
  EXPECT_NE(line.find("ETA 2562047:47:16"), std::string::npos) << line;
}

TEST(Progress, CurrentRateIsOverTheLastSecond) {
  ProgressMeter meter(Unit{'\n'}, std::nullopt);
  meter.line(totals_at(0s, 0));
  meter.line(totals_at(1s, 100));
  meter.line(totals_at(2s, 100));
  EXPECT_EQ(meter.line(totals_at(2500ms, 100)), "100 lines 0:00:02 [0 lines/s] [avg 40 lines/s]");
}

TEST(Summary, TextAndJson) {
  Result result{Ending::end_of_input, 0, totals_at(2s, 4000)};
  EXPECT_EQ(summary_text(result, Unit{}),
            "ratelimit: 4000 bytes in 2.000 s, 2.00 kB/s (rate 1.00 kB/s)");
  EXPECT_EQ(summary_json(result, Unit{}),
            R"({"unit":"bytes","units":4000,"bytes":4000,"seconds":2.000000,)"
            R"("average_rate":2000.000,"rate":1000,"ending":"end_of_input"})");
}

TEST(ControlMessage, RoundTripsAPositiveRate) {
  EXPECT_EQ(decode_rate("2500000"), 2.5e6);
  const std::string line = encode_rate(0.5);
  EXPECT_EQ(line, "0.5\n");
  EXPECT_EQ(decode_rate(line.substr(0, line.size() - 1)), 0.5);
  EXPECT_EQ(decode_rate("-1"), std::nullopt);
  EXPECT_EQ(decode_rate("0"), std::nullopt);
  EXPECT_EQ(decode_rate("5 parsecs"), std::nullopt);
}

}  // namespace
}  // namespace ratelimit::pipe
