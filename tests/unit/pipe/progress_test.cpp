#include "pipe/progress.hpp"

#include <gtest/gtest.h>

#include <limits>

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

TEST(Progress, ClockTime) { EXPECT_EQ(clock_time(3725s), "1:02:05"); }

constexpr format::Notation kBytes{.counted = format::Counted::bytes};
constexpr format::Notation kLines{.counted = format::Counted::lines};

TEST(Progress, LineShowsAmountTimeRatesAndWithATotalTheEta) {
  ProgressMeter meter(kBytes, 4000);
  meter.line(totals_at(0s, 0));
  EXPECT_EQ(meter.line(totals_at(1s, 1000), 100),
            "1.00 kB 0:00:01 [1.00 kB/s] [avg 1.00 kB/s] [========>                         ]  "
            "25% ETA 0:00:03");
}

TEST(Progress, LineFitsTheTerminalLessThreeColumns) {
  ProgressMeter meter(kBytes, 4'000'000'000);
  meter.line(totals_at(0s, 0));
  Totals totals = totals_at(3725s, 1'000'000'000);
  totals.rate = 1e6;
  // The widest numbers: 1.00 GB at 268 kB/s, with a bar, a percentage and an ETA.
  EXPECT_EQ(meter.line(totals, 80),
            "1.00 GB 1:02:05 [268 kB/s] [avg 268 kB/s] [====>           ]  25% ETA 3:06:15");
  // A Ctrl-C echoed as "^C" after the line stays on its line, the last column free: a line that
  // reached it wrapped the "^C", and the final redraw then printed the line a second time.
  EXPECT_EQ(meter.line(totals, 80).size(), 77u);
  EXPECT_EQ(meter.line(totals, 200),
            "1.00 GB 1:02:05 [268 kB/s] [avg 268 kB/s] [==========>                             "
            "]  25% ETA 3:06:15");
  EXPECT_EQ(meter.line(totals, 50), "1.00 GB 1:02:05 [268 kB/s] [===>         ]  25%");
  for (int width = 1; width <= 200; ++width)
    EXPECT_LE(meter.line(totals, width).size(), static_cast<std::size_t>(std::max(width - 3, 0)))
        << width;
  EXPECT_EQ(meter.line(totals, 30), "1.00 GB [268 kB/s]  25%");
}

TEST(Progress, NarrowLinesLeaveOutWholeParts) {
  ProgressMeter meter(kBytes, 4'000'000'000);
  meter.line(totals_at(0s, 0));
  Totals totals = totals_at(3725s, 1'000'000'000);
  totals.rate = 1e6;
  EXPECT_EQ(meter.line(totals, 20), "1.00 GB  25%");
  EXPECT_EQ(meter.line(totals, 12), "1.00 GB");
  EXPECT_EQ(meter.line(totals, 6), "");
  ProgressMeter no_total(kBytes, std::nullopt);
  no_total.line(totals_at(0s, 0));
  EXPECT_EQ(no_total.line(totals, 20), "1.00 GB");
  EXPECT_EQ(no_total.line(totals, 30), "1.00 GB 1:02:05 [268 kB/s]");
}

TEST(Progress, LinesCountLinesNotBytes) {
  // 200 lines of uneven lengths: 60 out is 30%, whatever their bytes.
  ProgressMeter meter(kLines, 200);
  Totals start = totals_at(0s, 0);
  start.rate = 20;
  meter.line(start);
  Totals totals = totals_at(3s, 60);
  totals.bytes = 171;
  totals.rate = 20;
  EXPECT_EQ(meter.line(totals, 80),
            "60 lines 0:00:03 [20 lines/s] [avg 20 lines/s] [===>       ]  30% ETA 0:00:07");
}

TEST(Progress, EtaFollowsTheRateWhileTheAverageIsAboveIt) {
  // -l --rate 1/m on 10 lines: the first line is free, so the average starts far above the rate;
  // the 9 lines left take 9 minutes.
  ProgressMeter lines({.counted = format::Counted::lines, .period_seconds = 60}, 10);
  Totals start = totals_at(0s, 0);
  start.rate = 1.0 / 60;
  lines.line(start);
  Totals one = totals_at(3s, 1);
  one.rate = 1.0 / 60;
  EXPECT_EQ(lines.line(one, 100),
            "1 line 0:00:03 [20 lines/m] [avg 20 lines/m] [===>                             ]  10% "
            "ETA 0:09:00");
  // --rate 1/h on 692 bytes: 691 hours left.
  ProgressMeter bytes({.counted = format::Counted::bytes, .period_seconds = 3600}, 692);
  start.rate = 1.0 / 3600;
  bytes.line(start);
  Totals first = totals_at(1s, 1);
  first.rate = 1.0 / 3600;
  const std::string line = bytes.line(first, 100);
  EXPECT_NE(line.find("ETA 691:00:00"), std::string::npos) << line;
  // Below the rate (a slow producer) the average it measures holds.
  ProgressMeter slow(kBytes, 4000);
  slow.line(totals_at(0s, 0));
  const std::string slow_line = slow.line(totals_at(2s, 1000), 100);
  EXPECT_NE(slow_line.find("ETA 0:00:06"), std::string::npos) << slow_line;
}

TEST(Progress, EveryRateOfTheLinePerOnePeriod) {
  // --rate 0.5 (no period written): 30 lines a minute; a current rate of 0 is "/m" too, not "/s".
  ProgressMeter meter(kLines, std::nullopt);
  Totals start = totals_at(0s, 0);
  start.rate = 0.5;
  meter.line(start);
  Totals later = totals_at(4s, 2);
  later.rate = 0.5;
  meter.line(later);
  Totals idle = totals_at(6s, 2);
  idle.rate = 0.5;
  EXPECT_EQ(meter.line(idle), "2 lines 0:00:06 [0 lines/m] [avg 20 lines/m]");
}

TEST(Progress, UnitsAsTheRateWasWritten) {
  ProgressMeter binary({.counted = format::Counted::bytes, .binary_prefix = true}, std::nullopt);
  binary.line(totals_at(0s, 0));
  EXPECT_EQ(binary.line(totals_at(1s, 10 * 1024 * 1024)),
            "10.0 MiB 0:00:01 [10.0 MiB/s] [avg 10.0 MiB/s]");
  ProgressMeter bits({.counted = format::Counted::bytes, .bits = true}, std::nullopt);
  bits.line(totals_at(0s, 0));
  EXPECT_EQ(bits.line(totals_at(1s, 1'000'000)),
            "8.00 Mbit 0:00:01 [8.00 Mbit/s] [avg 8.00 Mbit/s]");
  // Records are never bits.
  ProgressMeter lines({.counted = format::Counted::lines, .bits = true}, std::nullopt);
  lines.line(totals_at(0s, 0));
  EXPECT_EQ(lines.line(totals_at(1s, 20)), "20 lines 0:00:01 [20 lines/s] [avg 20 lines/s]");
}

TEST(Progress, AnEtaBeyondWhatNanosecondsHoldSaturates) {
  ProgressMeter meter(kBytes, 1'000'000'000'000'000'000);
  meter.line(totals_at(0s, 0));
  // About 3e13 years left: shown as the longest time there is, not as 0:00:00.
  const std::string line = meter.line(totals_at(1000s, 1));
  EXPECT_NE(line.find("ETA 2562047:47:16"), std::string::npos) << line;
}

TEST(Progress, CurrentRateIsOverTheLastSecond) {
  ProgressMeter meter(kLines, std::nullopt);
  meter.line(totals_at(0s, 0));
  meter.line(totals_at(1s, 100));
  meter.line(totals_at(2s, 100));
  EXPECT_EQ(meter.line(totals_at(2500ms, 100)), "100 lines 0:00:02 [0 lines/s] [avg 40 lines/s]");
}

TEST(Summary, TextAndJson) {
  Result result{Ending::end_of_input, 0, totals_at(2s, 2000), {}};
  EXPECT_EQ(summary_text(result, kBytes),
            "ratelimit: 2000 bytes in 2.000 s, 1.00 kB/s (rate 1kB/s)");
  EXPECT_EQ(summary_json(result, kBytes, 0s),
            R"({"unit":"bytes","units":2000,"bytes":2000,"seconds":2,"average_rate":1000,)"
            R"("rate":1000,"rate_text":"1kB/s","average_above_rate":false,"ending":"end_of_input",)"
            R"("rate_changes":[],"quotas":[],"held_by_quotas_seconds":0})");
}

// The JSON summary of `result` holds `part`.
void expect_json_holds(const Result& result, const std::string& part) {
  const std::string json = summary_json(result, kBytes, 0s);
  EXPECT_NE(json.find(part), std::string::npos) << json;
}

TEST(Summary, SaysWhatTheQuotasCountedAndHowLongTheyHeldThePipe) {
  Result result{Ending::end_of_input, 0, totals_at(2s, 2000), {}};
  result.totals.held_by_quotas = 1500ms;
  result.quotas = {
      {.key = {},
       .quota = {.params = {.limit = 1000, .period = 1s}, .used = 900, .next_free_in = 0s}},
      {.key = {},
       .quota = {.params = {.limit = 50000, .period = 24h}, .used = 2000, .next_free_in = 0s}}};
  EXPECT_EQ(summary_text(result, kBytes),
            "ratelimit: 2000 bytes in 2.000 s, 1.00 kB/s (rate 1kB/s); held by quotas 1.5s\n"
            "ratelimit: quota 1kB/s: 900 used in the window\n"
            "ratelimit: quota 50kB/d: 2000 used in the window");
  expect_json_holds(result,
                    R"("quotas":[{"quota":"1kB/s","limit":1000,"period_seconds":1,"used":900},)"
                    R"({"quota":"50kB/d","limit":50000,"period_seconds":86400,"used":2000}],)"
                    R"("held_by_quotas_seconds":1.5})");
  // A pipe with several keys names the key of each quota.
  result.quotas[0].key = "host:a";
  result.quotas[1].key = "fleet";
  EXPECT_TRUE(summary_text(result, kBytes)
                  .ends_with("\nratelimit: quota 1kB/s of key 'host:a': 900 used in the window\n"
                             "ratelimit: quota 50kB/d of key 'fleet': 2000 used in the window"))
      << summary_text(result, kBytes);
  expect_json_holds(result,
                    R"("quotas":[{"quota":"1kB/s","limit":1000,"period_seconds":1,"used":900,)"
                    R"("key":"host:a"},{"quota":"50kB/d","limit":50000,"period_seconds":86400,)"
                    R"("used":2000,"key":"fleet"}],)");
}

TEST(Summary, InTheNotationOfTheRate) {
  Totals totals = totals_at(1s, 1'000'000);
  totals.rate = 1'000'000;
  const Result result{Ending::end_of_input, 0, totals, {}};
  // As the progress line shows it: 8Mbit/s is not shown as 1.00 MB/s.
  EXPECT_EQ(summary_text(result, {.counted = format::Counted::bytes, .bits = true}),
            "ratelimit: 1000000 bytes in 1.000 s, 8.00 Mbit/s (rate 8Mbit/s)");
  Totals lines = totals_at(2s, 2);
  lines.bytes = 4;
  lines.rate = 1;
  EXPECT_EQ(summary_text({Ending::end_of_input, 0, lines, {}}, kLines),
            "ratelimit: 2 lines in 2.000 s, 1 line/s (rate 1/s), 4 bytes");
}

TEST(Summary, SaysWhyTheAverageIsAboveTheRate) {
  Result result{Ending::end_of_input, 0, totals_at(2s, 4000), {}};
  EXPECT_EQ(summary_text(result, kBytes),
            "ratelimit: 4000 bytes in 2.000 s, 2.00 kB/s (rate 1kB/s; the first chunk is free)");
  EXPECT_NE(summary_json(result, kBytes, 0s).find(R"("average_above_rate":true)"),
            std::string::npos);
}

TEST(Summary, ReadableAtTheExtremes) {
  Totals huge = totals_at(1s, 100);
  huge.rate = 1e300;
  EXPECT_EQ(summary_text({Ending::end_of_input, 0, huge, {}}, kBytes),
            "ratelimit: 100 bytes in 1.000 s, 100 B/s (rate 1e300B/s)");
  Totals hourly = totals_at(3600s, 1);
  hourly.rate = 1.0 / 3600;
  EXPECT_EQ(summary_text({Ending::end_of_input, 0, hourly, {}}, kBytes),
            "ratelimit: 1 byte in 3600.000 s, 1 B/h (rate 1B/h)");
  Totals unlimited = totals_at(1s, 100);
  unlimited.rate = std::numeric_limits<double>::infinity();
  const Result off{Ending::end_of_input, 0, unlimited, {}};
  EXPECT_EQ(summary_text(off, kBytes), "ratelimit: 100 bytes in 1.000 s, 100 B/s (rate off)");
  EXPECT_NE(summary_json(off, kBytes, 0s).find(R"("rate":null,"rate_text":"off")"),
            std::string::npos);
}

TEST(Summary, JsonListsRateChangesAtTheirWallClockTimes) {
  Result result{Ending::end_of_input,
                0,
                totals_at(2s, 2000),
                {{1500ms, std::numeric_limits<double>::infinity()}, {1750ms, 20.0}}};
  EXPECT_EQ(summary_json(result, kBytes, 1'764'460'800s),
            R"({"unit":"bytes","units":2000,"bytes":2000,"seconds":2,"average_rate":1000,)"
            R"("rate":1000,"rate_text":"1kB/s","average_above_rate":false,"ending":"end_of_input",)"
            R"("rate_changes":[{"unix_time":1764460801.5,"rate":null,"rate_text":"off"},)"
            R"({"unix_time":1764460801.75,"rate":20,"rate_text":"20B/s"}],)"
            R"("quotas":[],"held_by_quotas_seconds":0})");
}

}  // namespace
}  // namespace ratelimit::pipe
