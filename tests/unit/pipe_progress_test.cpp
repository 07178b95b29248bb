#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <thread>

#include "control/control.hpp"
#include "pipe/progress.hpp"
#include "temp_dir.hpp"

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

TEST(Summary, SaysWhatTheQuotasCountedAndHowLongTheyHeldThePipe) {
  Result result{Ending::end_of_input, 0, totals_at(2s, 2000), {}};
  result.totals.held_by_quotas = 1500ms;
  result.quotas = {{.params = {.limit = 1000, .period = 1s}, .used = 900, .next_free_in = 0s},
                   {.params = {.limit = 50000, .period = 24h}, .used = 2000, .next_free_in = 0s}};
  EXPECT_EQ(summary_text(result, kBytes),
            "ratelimit: 2000 bytes in 2.000 s, 1.00 kB/s (rate 1kB/s); held by quotas 1.5s\n"
            "ratelimit: quota 1kB/s: 900 used in the window\n"
            "ratelimit: quota 50kB/d: 2000 used in the window");
  EXPECT_NE(summary_json(result, kBytes, 0s)
                .find(R"("quotas":[{"quota":"1kB/s","limit":1000,"period_seconds":1,"used":900},)"
                      R"({"quota":"50kB/d","limit":50000,"period_seconds":86400,"used":2000}],)"
                      R"("held_by_quotas_seconds":1.5})"),
            std::string::npos)
      << summary_json(result, kBytes, 0s);
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
  const PipeStatus bytes{.rate = 10485760, .units = 123456, .bytes = 123456, .answered = 3};
  EXPECT_EQ(encode_status(bytes),
            "ratelimit-pipe 4 bytes si 10485760 123456 123456 3 - 0 - 38f0b836\n");
  // A pipe started before the period and the timetable were published: read as neither.
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 10485760 123456 123456 3 - 9a9950cd\n"),
            bytes);
  EXPECT_EQ(decode_status(encode_status(bytes)), bytes);
  const PipeStatus lines{.notation = kLines, .rate = 1.0 / 3, .units = 7, .bytes = 700};
  EXPECT_EQ(decode_status(encode_status(lines)), lines);
  // How the rate was written, and the key, whatever its bytes.
  const PipeStatus bits{
      .notation = {.counted = format::Counted::bytes, .binary_prefix = true, .bits = true},
      .rate = 1e6,
      .key = "k \xff\n-"};
  EXPECT_EQ(encode_status(bits),
            "ratelimit-pipe 4 bits iec 1000000 0 0 0 6b20ff0a2d 0 - 9223e1fd\n");
  EXPECT_EQ(decode_status(encode_status(bits)), bits);
  const PipeStatus records{.notation = {.counted = format::Counted::records}, .rate = 5};
  EXPECT_EQ(decode_status(encode_status(records)), records);
  // The period the rate was written in, and the timetable followed.
  const PipeStatus scheduled{.notation = {.counted = format::Counted::lines, .period_seconds = 10},
                             .rate = 0.1,
                             .timetable = "18:00,off;Mon-08:00,512000"};
  EXPECT_EQ(decode_status(encode_status(scheduled)), scheduled);
  // A timetable's "off".
  const PipeStatus unlimited{.rate = std::numeric_limits<double>::infinity(), .units = 1};
  EXPECT_EQ(decode_status(encode_status(unlimited)), unlimited);
  const PipeStatus most{.rate = 1e300,
                        .units = std::numeric_limits<std::uint64_t>::max(),
                        .bytes = std::numeric_limits<std::uint64_t>::max(),
                        .key = std::string(80, '\xff')};
  EXPECT_EQ(decode_status(encode_status(most)), most);
}

TEST(PipeStatusRecord, BelievesOnlyAWholeRecord) {
  const std::string record = encode_status({.rate = 5, .units = 1, .bytes = 1});
  for (std::size_t size = 0; size < record.size(); ++size)
    EXPECT_EQ(decode_status(record.substr(0, size)), std::nullopt) << size;
  EXPECT_EQ(decode_status(record + record), std::nullopt);
  // A rewrite met half done: the new record's fields with the old one's check.
  const std::string rewritten = encode_status({.rate = 5, .units = 1000, .bytes = 1000});
  const std::size_t check = record.size() - 10;
  EXPECT_EQ(decode_status(rewritten.substr(0, rewritten.size() - 10) + record.substr(check)),
            std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 2 bytes 5 1 1 0\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5 1 1 - 0329b3e2\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 blocks si 5 1 1 0 - 654c530b\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes metric 5 1 1 0 - 3c413d2a\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 0 1 1 0 - 2284de81\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si nan 1 1 0 - 55ee01d8\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5 -1 1 0 - fbcb067d\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5 1 1 -1 - da36b072\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5 1 1 0 - 1 a89c0f7d\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5  1 1 0 - ef3bab2c\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5 1 1 0 -  dbc6949e\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5 1 1 0 6b2 9284973f\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5 1 1 0 6x 2dd85ed5\n"), std::nullopt);
  EXPECT_EQ(decode_status("ratelimit-pipe 4 bytes si 5 1 1 0  5a8b1ca3\n"), std::nullopt);
}

// This process as a running pipe: its channel, and the pipe as `status` and `set` find it.
class RunningPipeStatus : public ::testing::Test {
 protected:
  void SetUp() override {
    channel = ControlChannel::create(state.string(), true);
    ASSERT_TRUE(channel);
    pipe = find_running_pipe(state.string(), ::getpid());
    ASSERT_TRUE(pipe);
  }

  const testing::TempDir state;
  std::unique_ptr<ControlChannel> channel;
  std::optional<RunningPipe> pipe;
};

// The status file is created once and then rewritten in place, a shorter record included.
TEST_F(RunningPipeStatus, ARunningPipesStatusIsItsLastPublished) {
  ASSERT_TRUE(send_rate(*pipe, 5.0));
  EXPECT_EQ(channel->take_lines(), std::vector<std::string>{"5"});
  const PipeStatus first{
      .rate = 5, .units = 10, .bytes = 10, .answered = 1, .key = std::string(40, 'k')};
  channel->publish(first, 0s);
  EXPECT_EQ(read_status(*pipe), first);
  const PipeStatus later{.rate = 5, .units = 20, .bytes = 20, .answered = 1};
  channel->publish(later, 1s);
  EXPECT_EQ(read_status(*pipe), later);
  const PipeStatus longer{
      .rate = 5e6, .units = 123456789, .bytes = 123456789, .answered = 1, .key = "api"};
  channel->publish(longer, 2s);
  EXPECT_EQ(read_status(*pipe), longer);
}

// Nobody looks at most pipes: a pipe publishes nothing until a line comes through its FIFO, such
// as the request that `status` sends, which carries no rate and is only counted.
TEST_F(RunningPipeStatus, APipeNobodyAskedPublishesNothing) {
  channel->publish({.rate = 5}, 0s);
  channel->publish({.rate = 6}, 5s);
  EXPECT_EQ(read_status(*pipe), std::nullopt);
  EXPECT_FALSE(
      std::filesystem::exists(state.path() / ("pipe-" + std::to_string(::getpid()) + ".status")));

  // A request: `current_status` sends it, then waits for the answer that this test gives. It is
  // no rate and not counted as answered, so a `set` at the same time still waits for its own.
  std::thread asker([&] { EXPECT_EQ(current_status(*pipe, 10s).value_or(PipeStatus{}).rate, 7); });
  pollfd request{channel->fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&request, 1, 10000), 1);
  EXPECT_EQ(channel->take_lines(), std::vector<std::string>{});
  channel->publish({.rate = 7}, 6s);
  asker.join();
  EXPECT_EQ(read_status(*pipe), (PipeStatus{.rate = 7, .answered = 0}));

  // A rate and another request (as a `status` at the same time as a `set` sends it): only the
  // rate is counted, as `set` expects.
  ASSERT_TRUE(send_rate(*pipe, 8.0));
  {
    const io::FileDescriptor fifo(::open((state.path() / pipe->fifo_name).c_str(), O_WRONLY));
    ASSERT_EQ(::write(fifo.get(), "status\n", 7), 7);
  }
  EXPECT_EQ(channel->take_lines(), std::vector<std::string>{"8"});
  channel->publish({.rate = 8}, 7s);
  EXPECT_EQ(read_status(*pipe), (PipeStatus{.rate = 8, .answered = 1}));
  EXPECT_EQ(decode_rate("status"), std::nullopt);
}

}  // namespace
}  // namespace ratelimit::pipe
