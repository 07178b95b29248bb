// Live control: the messages `set` sends a pipe, the status records a pipe publishes, and a
// running pipe as `status` and `set` find it.
#include "control/control.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "temp_dir.hpp"

namespace ratelimit::control {
namespace {

using namespace std::chrono_literals;

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
  const PipeStatus lines{
      .notation = {.counted = format::Counted::lines}, .rate = 1.0 / 3, .units = 7, .bytes = 700};
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

// A pipe with several keys: each key and how long it held the pipe, and the key it waits for.
TEST(PipeStatusRecord, RoundTripsTheKeysOfAPipeWithSeveral) {
  const PipeStatus several{
      .rate = 1000,
      .key = "hi",
      .keys = {{.key = "hi", .held_seconds = 0.5}, {.key = "all", .held_seconds = 2.25}},
      .held_by = "all"};
  const std::string record = encode_status(several);
  EXPECT_TRUE(
      record.starts_with("ratelimit-pipe 4 bytes si 1000 0 0 0 6869 0 - 6869=0.5,616c6c=2.25 "
                         "616c6c "))
      << record;
  EXPECT_EQ(decode_status(record), several);
  PipeStatus waits_for_none = several;
  waits_for_none.held_by.clear();
  EXPECT_EQ(decode_status(encode_status(waits_for_none)), waits_for_none);
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
TEST(CallStatusRecord, RoundTripsTheKeysOfAWaitingCall) {
  const CallStatus call{
      .command = "acquire",
      .keys = {{.key = "a", .held_seconds = 0}, {.key = "b", .held_seconds = 59.5}},
      .held_by = "b",
      .until = 81234567890ns};
  const std::string record = encode_call_status(call);
  EXPECT_TRUE(record.starts_with("ratelimit-call 2 acquire turn 61=0,62=59.5 62 81234567890 "))
      << record;
  EXPECT_EQ(decode_call_status(record), call);
  // A wait for a --max-inflight slot with no end known, and for a pause.
  CallStatus slot = call;
  slot.waits_for = CallWait::slot;
  slot.held_by = "a";
  slot.until = std::chrono::nanoseconds::max();
  EXPECT_TRUE(
      encode_call_status(slot).starts_with("ratelimit-call 2 acquire slot 61=0,62=59.5 61 "
                                           "9223372036854775807 "));
  EXPECT_EQ(decode_call_status(encode_call_status(slot)), slot);
  CallStatus pause = call;
  pause.waits_for = CallWait::pause;
  EXPECT_EQ(decode_call_status(encode_call_status(pause)), pause);
  for (std::size_t size = 0; size < record.size(); ++size)
    EXPECT_EQ(decode_call_status(record.substr(0, size)), std::nullopt) << size;
  // Not a call's record: a pipe's, one key only, a command that is not a word.
  EXPECT_EQ(decode_call_status(encode_status({.rate = 5})), std::nullopt);
  EXPECT_EQ(decode_call_status(encode_call_status(
                {.command = "exec", .keys = {{.key = "a"}}, .held_by = "a", .until = 1ns})),
            std::nullopt);
  CallStatus not_a_word = call;
  not_a_word.command = "ac-quire";
  EXPECT_EQ(decode_call_status(encode_call_status(not_a_word)), std::nullopt);
}

// A waiting call is listed while its record lives, and not once it is removed, nor when its
// process is gone or its wait ended long ago (a record left under a process id used again).
TEST(WaitingCallRecord, IsListedOnlyWhileTheCallWaits) {
  const testing::TempDir state;
  const CallStatus call{
      .command = "exec",
      .keys = {{.key = "site:a", .held_seconds = 0}, {.key = "all", .held_seconds = 3}},
      .held_by = "all",
      .until = io::monotonic_now() + 60s};
  {
    const std::unique_ptr<WaitingCallRecord> record =
        WaitingCallRecord::create(state.string(), call);
    ASSERT_TRUE(record);
    const std::vector<ListedCall> calls = list_waiting_calls(state.string());
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls.front().pid, ::getpid());
    EXPECT_EQ(calls.front().status, call);
  }
  EXPECT_TRUE(list_waiting_calls(state.string()).empty());
  EXPECT_TRUE(std::filesystem::is_empty(state.path()));
  {
    // A wait for a slot with no end known is listed too.
    CallStatus slot = call;
    slot.waits_for = CallWait::slot;
    slot.until = std::chrono::nanoseconds::max();
    const std::unique_ptr<WaitingCallRecord> record =
        WaitingCallRecord::create(state.string(), slot);
    ASSERT_TRUE(record);
    EXPECT_EQ(list_waiting_calls(state.string()).size(), 1u);
  }

  CallStatus ended = call;
  ended.until = io::monotonic_now() - 2s;
  const std::unique_ptr<WaitingCallRecord> record =
      WaitingCallRecord::create(state.string(), ended);
  ASSERT_TRUE(record);
  EXPECT_TRUE(list_waiting_calls(state.string()).empty());

  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  const std::string left = "call-" + std::to_string(gone) + ".status";
  { std::ofstream(state.path() / left) << encode_call_status(call); }
  EXPECT_TRUE(list_waiting_calls(state.string()).empty());
  // The next call tidies it away.
  const std::unique_ptr<WaitingCallRecord> next = WaitingCallRecord::create(state.string(), call);
  EXPECT_FALSE(std::filesystem::exists(state.path() / left));
}

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

  // A request: `current_status` sends it, then waits for the answer that this test gives.
  // It is no rate and not counted as answered, so a `set` at the same time still waits for its own.
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
}  // namespace ratelimit::control
