#include <gtest/gtest.h>

#include <limits>

#include "control/control.hpp"
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
  EXPECT_EQ(meter.line(totals_at(1s, 1000), 100),
            "1.00 kB 0:00:01 [1.00 kB/s] [avg 1.00 kB/s] [=========>                          ]  "
            "25% ETA 0:00:03");
}

TEST(Progress, LineFitsTheTerminalLessOneColumn) {
  ProgressMeter meter(Unit{}, 4'000'000'000);
  meter.line(totals_at(0s, 0));
  const Totals totals = totals_at(3725s, 1'000'000'000);
  // The widest numbers: 1.00 GB at 268 kB/s, with a bar, a percentage and an ETA.
  EXPECT_EQ(meter.line(totals, 80),
            "1.00 GB 1:02:05 [268 kB/s] [avg 268 kB/s] [====>             ]  25% ETA 3:06:15");
  EXPECT_EQ(meter.line(totals, 80).size(), 79u);
  EXPECT_EQ(meter.line(totals, 200),
            "1.00 GB 1:02:05 [268 kB/s] [avg 268 kB/s] [==========>                             "
            "]  25% ETA 3:06:15");
  EXPECT_EQ(meter.line(totals, 50), "1.00 GB 1:02:05 [268 kB/s] [===>           ]  25%");
  for (int width = 1; width <= 200; ++width)
    EXPECT_LE(meter.line(totals, width).size(), static_cast<std::size_t>(width - 1)) << width;
  EXPECT_EQ(meter.line(totals, 30), "1.00 GB [268 kB/s]  25%");
  EXPECT_EQ(meter.line(totals, 10), "1.00 GB [");
}

TEST(Progress, UnitsAsTheRateWasWritten) {
  ProgressMeter binary(Unit{}, std::nullopt, {.binary_prefix = true, .bits = false});
  binary.line(totals_at(0s, 0));
  EXPECT_EQ(binary.line(totals_at(1s, 10 * 1024 * 1024)),
            "10.0 MiB 0:00:01 [10.0 MiB/s] [avg 10.0 MiB/s]");
  ProgressMeter bits(Unit{}, std::nullopt, {.binary_prefix = false, .bits = true});
  bits.line(totals_at(0s, 0));
  EXPECT_EQ(bits.line(totals_at(1s, 1'000'000)),
            "8.00 Mbit 0:00:01 [8.00 Mbit/s] [avg 8.00 Mbit/s]");
  // Records are never bits.
  ProgressMeter lines(Unit{'\n'}, std::nullopt, {.binary_prefix = false, .bits = true});
  lines.line(totals_at(0s, 0));
  EXPECT_EQ(lines.line(totals_at(1s, 20)), "20 lines 0:00:01 [20 lines/s] [avg 20 lines/s]");
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
  Result result{Ending::end_of_input, 0, totals_at(2s, 4000), {}};
  EXPECT_EQ(summary_text(result, Unit{}),
            "ratelimit: 4000 bytes in 2.000 s, 2.00 kB/s (rate 1.00 kB/s)");
  EXPECT_EQ(summary_json(result, Unit{}, 0s),
            R"({"unit":"bytes","units":4000,"bytes":4000,"seconds":2.000000,)"
            R"("average_rate":2000.000,"rate":1000,"ending":"end_of_input","rate_changes":[]})");
}

TEST(Summary, JsonListsRateChangesAtTheirWallClockTimes) {
  Result result{Ending::end_of_input,
                0,
                totals_at(2s, 4000),
                {{1500ms, std::numeric_limits<double>::infinity()}, {1750ms, 20.0}}};
  EXPECT_EQ(summary_json(result, Unit{}, 1'764'460'800s),
            R"({"unit":"bytes","units":4000,"bytes":4000,"seconds":2.000000,)"
            R"("average_rate":2000.000,"rate":1000,"ending":"end_of_input","rate_changes":[)"
            R"({"unix_time":1764460801.500,"rate":null},{"unix_time":1764460801.750,"rate":20}]})");
}

// The rate of a decoded message; none if it is not a rate.
std::optional<double> rate_in(std::string_view line) {
  const std::optional<NewRate> decoded = decode_rate(line);
  if (!decoded || !std::holds_alternative<double>(*decoded)) return std::nullopt;
  return std::get<double>(*decoded);
}

TEST(ControlMessage, RoundTripsAPositiveRate) {
  EXPECT_EQ(rate_in("2500000"), 2.5e6);
  const std::string line = encode_rate(0.5);
  EXPECT_EQ(line, "0.5\n");
  EXPECT_EQ(rate_in(line.substr(0, line.size() - 1)), 0.5);
  EXPECT_EQ(decode_rate("-1"), std::nullopt);
  EXPECT_EQ(decode_rate("0"), std::nullopt);
  EXPECT_EQ(decode_rate("5 parsecs"), std::nullopt);
}

TEST(ControlMessage, RoundTripsATimetable) {
  const Timetable timetable(
      {{0, 8 * 60, 512000.0}, {std::nullopt, 18 * 60, std::numeric_limits<double>::infinity()}});
  const std::string line = encode_rate(timetable);
  EXPECT_EQ(line, "timetable 18:00,off;Mon-08:00,512000\n");
  const std::optional<NewRate> decoded = decode_rate(line.substr(0, line.size() - 1));
  ASSERT_TRUE(decoded && std::holds_alternative<Timetable>(*decoded));
  EXPECT_EQ(encode_rate(*decoded), line);
  EXPECT_EQ(decode_rate("timetable 08:00,1M"), std::nullopt);
  EXPECT_EQ(decode_rate("timetable "), std::nullopt);
  EXPECT_EQ(decode_rate("08:00,5"), std::nullopt);
}

TEST(PipeStatusRecord, RoundTripsWhatAPipeSays) {
  const PipeStatus bytes{
      .counts_bytes = true, .rate = 10485760, .units = 123456, .bytes = 123456, .answered = 3};
  EXPECT_EQ(encode_status(bytes), "ratelimit-pipe 2 bytes 10485760 123456 123456 3\n");
  EXPECT_EQ(decode_status(encode_status(bytes)), bytes);
  const PipeStatus lines{.counts_bytes = false, .rate = 1.0 / 3, .units = 7, .bytes = 700};
  EXPECT_EQ(decode_status(encode_status(lines)), lines);
  // A timetable's "off".
  const PipeStatus unlimited{.rate = std::numeric_limits<double>::infinity(), .units = 1};
  EXPECT_EQ(decode_status(encode_status(unlimited)), unlimited);
  const PipeStatus most{.rate = 1e300,
                        .units = std::numeric_limits<std::uint64_t>::max(),
                        .bytes = std::numeric_limits<std::uint64_t>::max()};
  EXPECT_EQ(decode_status(encode_status(most)), most);
}

TEST(PipeStatusRecord, BelievesOnlyAWholeRecord) {
  const std::string record = encode_status({.rate = 5, .units = 1, .bytes = 1});
  for (std::size_t size = 0; size < record.size(); ++size)
    EXPECT_EQ(decode_status(record.substr(0, size)), std::nullopt) << size;
  EXPECT_EQ(decode_status(record + record), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 1 bytes 5 1 1 0\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes 5 1 1\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 blocks 5 1 1 0\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes 0 1 1 0\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes nan 1 1 0\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes 5 -1 1 0\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes 5 1 1 -1\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes 5 1 1 0 1\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes 5  1 1 0\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes 5 1 1 0 \n"), std::nullopt);
}

}  // namespace
}  // namespace ratelimit::pipe
