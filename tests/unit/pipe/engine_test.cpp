#include "pipe/engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <limits>

#include "fake_pipe_io.hpp"

namespace ratelimit::pipe {
namespace {

using namespace std::chrono_literals;
using testing::FakePipeIo;
using Write = FakePipeIo::Write;

EngineOptions bytes_per_second(double rate, std::int64_t chunk) {
  EngineOptions options;
  options.bucket.permits_per_second = rate;
  options.chunk_units = chunk;
  return options;
}

EngineOptions lines_per_second(double rate, std::int64_t chunk, std::size_t buffer = 64 * 1024) {
  EngineOptions options = bytes_per_second(rate, chunk);
  options.unit = Unit{'\n'};
  options.buffer_bytes = buffer;
  return options;
}

TEST(DefaultChunk, IsTheWriteIntervalOfTheRateWithinBounds) {
  EXPECT_EQ(default_chunk_units(5000, 65536, 10ms), 50);
  EXPECT_EQ(default_chunk_units(1000, 65536, 10ms), 10);
  EXPECT_EQ(default_chunk_units(20, 4096, 10ms), 1);
  EXPECT_EQ(default_chunk_units(0.5, 4096, 10ms), 1);
  EXPECT_EQ(default_chunk_units(std::numeric_limits<double>::infinity(), 65536, 10ms), 65536);
}

// 10 ms of 100 MB/s is 1 MB: in 16 writes of 62500 bytes, one every 625 us, rather than in
// chunks of 65536 (a period of 655 us, whose 10 ms windows would hold 16 of them).
TEST(DefaultChunk, AnIntervalOverTheLargestChunkIsDividedEvenly) {
  EXPECT_EQ(default_chunk_units(100e6, 65536, 10ms), 62500);
  EXPECT_EQ(default_chunk_units(10e6, 1 << 20, 108ms), 540000);
}

// Bytes: one interval of 108 ms per write, or per writes of equal parts where it does not fit a
// pipe, so that a 100 ms window never holds more than one interval; records every 10 ms.
TEST(DefaultChunk, BytesGoEvery108MsRecordsEvery10Ms) {
  EngineOptions bytes;
  EXPECT_EQ(bytes.write_interval(), 108ms);
  EXPECT_EQ(default_chunk_units(1000, 65536, bytes.write_interval()), 108);
  EXPECT_EQ(default_chunk_units(10e6, 1 << 20, bytes.write_interval()), 540000);
  EngineOptions lines;
  lines.unit = Unit{'\n'};
  EXPECT_EQ(lines.write_interval(), 10ms);
  // While warming up, an interval of the coldest rate (cold factor 3).
  EngineOptions warming = bytes;
  warming.bucket.shape = BucketShape::warming_up;
  EXPECT_EQ(warming.default_chunk(1e6, 1 << 20), 36000);
  EXPECT_EQ(bytes.default_chunk(1e6, 1 << 20), 108000);
  lines.chunk_interval = 50ms;
  EXPECT_EQ(lines.write_interval(), 50ms);
}

TEST(DefaultChunk, FollowsTheTimeBetweenWrites) {
  EXPECT_EQ(default_chunk_units(1000, 65536, 50ms), 50);
  EXPECT_EQ(default_chunk_units(3000, 65536, 1ms), 3);
  EXPECT_EQ(default_chunk_units(20, 4096, 50ms), 1);
}

// A shared pipe books 54 ms of the rate at a time and writes it in the fewest equal parts of 12 ms
// or less (5 of 10.8 ms); a chunk that is not a whole number of parts (a pipe's last) goes in parts
// no longer than that, a chunk of one part or less whole.
TEST(DefaultChunk, ASharedPipeWritesPartsOf12MsAtMost) {
  EXPECT_EQ(shared_writes_per_chunk(kSharedByteWriteInterval), 5);
  EXPECT_EQ(shared_writes_per_chunk(kByteWriteInterval), 9);
  EXPECT_EQ(shared_writes_per_chunk(kRecordWriteInterval), 1);
  EXPECT_EQ(chunk_part_units(1e6, 54000, kSharedByteWriteInterval / 5), 10800);
  EXPECT_EQ(chunk_part_units(1e6, 36000, kSharedWritePart), 12000);
  EXPECT_EQ(chunk_part_units(1e6, 20000, kSharedWritePart), 10000);
  EXPECT_EQ(chunk_part_units(1e6, 68000, kSharedWritePart), 11334);
  EXPECT_EQ(chunk_part_units(1e6, 12000, kSharedWritePart), 12000);
  EXPECT_EQ(chunk_part_units(1e6, 5000, kSharedWritePart), 5000);
}

TEST(PipeEngine, WritesChunksAtExactlyTheRate) {
  FakePipeIo io;
  io.arrive(0s, std::string(100, 'x'));
  const Result result = Engine(bytes_per_second(1000, 20), io).run();

  const std::string chunk(20, 'x');
  EXPECT_EQ(io.writes(),
            (std::vector<Write>{
                {0ms, chunk}, {20ms, chunk}, {40ms, chunk}, {60ms, chunk}, {80ms, chunk}}));
  EXPECT_EQ(result.ending, Ending::end_of_input);
  EXPECT_EQ(result.totals.bytes, 100u);
  EXPECT_EQ(result.totals.units, 100u);
  // The cost of the last chunk is left unpaid: no wait after the end of the input.
  EXPECT_EQ(io.elapsed(), 80ms);
}

// --stats: how long the quotas held the pipe, not the rate, and what they counted at the end.
TEST(PipeEngine, CountsTheTimeTheQuotasHoldIt) {
  FakePipeIo io;
  io.arrive(0s, std::string(100, 'x'));
  EngineOptions options = bytes_per_second(std::numeric_limits<double>::infinity(), 20);
  options.quotas = {{.limit = 40, .period = 1s}};
  Engine engine(options, io);
  const Result result = engine.run();
  EXPECT_EQ(io.output(), std::string(100, 'x'));
  // 40 at once, 40 a period later and 20 another period later: held two periods.
  EXPECT_GE(result.totals.held_by_quotas, 1900ms);
  EXPECT_LE(result.totals.held_by_quotas, io.elapsed());
  const std::vector<KeyQuotaStatus> quotas = engine.quota_status();
  ASSERT_EQ(quotas.size(), 1u);
  EXPECT_EQ(quotas[0].key, "");
  EXPECT_EQ(quotas[0].quota.params, options.quotas[0]);
  EXPECT_GE(quotas[0].quota.used, 20);
  EXPECT_LE(quotas[0].quota.used, 40);

  // Held by the rate alone: nothing counted.
  FakePipeIo by_rate;
  by_rate.arrive(0s, std::string(100, 'x'));
  options.bucket.permits_per_second = 100;
  options.quotas = {{.limit = 1000, .period = 1s}};
  Engine rate_engine(options, by_rate);
  EXPECT_EQ(rate_engine.run().totals.held_by_quotas, 0ns);
  EXPECT_EQ(by_rate.elapsed(), 800ms);
  EXPECT_EQ(rate_engine.quota_status().at(0).quota.used, 100);
}

// A quota of 100 an hour and chunks of 6: a 17th chunk would make 102, but the input holds only 4
// more, known once its writer closes (at once, or while the 17th turn is waited for): the 4 go at
// their turn, not when the hour has passed.
TEST(PipeEngine, AnInputsKnownRestIsAllThatIsAskedFor) {
  for (const bool spliced : {false, true}) {
    for (const std::chrono::nanoseconds writer_closes : {0ms, 95ms}) {
      FakePipeIo io;
      if (spliced) io.allow_splice();
      io.arrive(0s, std::string(96, 'x'));
      io.arrive(writer_closes, std::string(4, 'y'));
      EngineOptions options = bytes_per_second(1000, 6);
      options.quotas = {{.limit = 100, .period = 1h}};
      Engine(options, io).run();
      EXPECT_EQ(io.output(), std::string(96, 'x') + std::string(4, 'y'));
      EXPECT_LE(io.elapsed(), 100ms) << spliced << " " << writer_closes.count();
    }
  }
}

// An input whose writer closes without a byte: under a quota its rest, asked before a booking,
// is nothing, and nothing is booked.
TEST(PipeEngine, AnInputKnownToBeEmptyBooksNothing) {
  for (const bool spliced : {false, true}) {
    FakePipeIo io;
    if (spliced) io.allow_splice();
    io.arrive(0s, "");
    EngineOptions options = bytes_per_second(1000, 6);
    options.quotas = {{.limit = 100, .period = 1h}};
    EXPECT_EQ(Engine(options, io).run().ending, Ending::end_of_input);
    EXPECT_EQ(io.output(), "");
  }
}

TEST(PipeEngine, SplicesOnTheSameScheduleWhenPossible) {
  FakePipeIo io;
  io.allow_splice();
  io.arrive(0s, std::string(60, 's'));
  Engine(bytes_per_second(1000, 20), io).run();

  const std::string chunk(20, 's');
  EXPECT_EQ(io.writes(), (std::vector<Write>{{0ms, chunk}, {20ms, chunk}, {40ms, chunk}}));
  EXPECT_GE(io.splices(), 3u);
  // The writer gone and its bytes moved: the end is found without waiting for the next turn.
  EXPECT_EQ(io.elapsed(), 40ms);
}

// The first chunk's turn came while the producer had written only part of it: the rest follows as
// it arrives, and the next chunk keeps its turn. Asked for at once instead, the next turn would
// come 12 ms after the start, and the 12 bytes at 0 ms, the next chunk at 12 ms and the one after
// it at 32 ms would put 52 bytes (2.6 chunks) in one 40 ms window.
TEST(PipeEngine, AChunkBegunGoesOutWholeBeforeTheNextTurn) {
  FakePipeIo io;
  io.allow_splice();
  io.arrive(0ms, std::string(12, 'a'));
  io.arrive(5ms, std::string(8, 'b') + std::string(40, 'c'));
  Engine(bytes_per_second(1000, 20), io).run();

  EXPECT_EQ(io.writes(), (std::vector<Write>{{0ms, std::string(12, 'a')},
                                             {5ms, std::string(8, 'b')},
                                             {20ms, std::string(20, 'c')},
                                             {40ms, std::string(20, 'c')}}));
}

TEST(PipeEngine, FallsBackToReadAndWriteWhenSpliceIsImpossible) {
  FakePipeIo io;
  io.arrive(0s, "abc");
  Engine(bytes_per_second(1, 10), io).run();
  EXPECT_EQ(io.writes(), (std::vector<Write>{{0ms, "abc"}}));
}

// --timeout: a turn further away than the longest wait ends the run, what was written whole and
// the rest of a file left unread; a turn within it is waited for.
TEST(PipeEngine, ATurnFurtherThanTheLongestWaitEndsTheRun) {
  FakePipeIo io;
  io.allow_unread();
  io.arrive(0s, "1\n2\n3\n");
  EngineOptions options = lines_per_second(1, 1);
  options.longest_wait = 500ms;
  const Result result = Engine(options, io).run();
  EXPECT_EQ(result.ending, Ending::wait_too_long);
  EXPECT_EQ(result.refused_wait, 1s);
  EXPECT_EQ(io.output(), "1\n");
  EXPECT_EQ(io.rest(), "2\n3\n");
  EXPECT_EQ(io.elapsed(), 0s);

  FakePipeIo within;
  within.arrive(0s, "1\n2\n3\n");
  options.longest_wait = 1s;
  EXPECT_EQ(Engine(options, within).run().ending, Ending::end_of_input);
  EXPECT_EQ(within.output(), "1\n2\n3\n");
}

// Lines from a pipe, which cannot take back what was read: under --stop-at-quota or --timeout
// each line's turn is asked for before the line is read, so a line whose turn is refused stays
// in the pipe, and no line read goes out past the quota.
TEST(PipeEngine, LinesFromAPipeAreReadOnlyOnceTheirTurnIsGranted) {
  FakePipeIo io;
  io.arrive(0s, "1\n2\n3\n4\n5\n");
  EngineOptions options = lines_per_second(1000, 10);
  options.quotas = {{.limit = 3, .period = 1h}};
  options.stop_at_quota = true;
  EXPECT_EQ(Engine(options, io).run().ending, Ending::quota_spent);
  EXPECT_EQ(io.output(), "1\n2\n3\n");
  EXPECT_EQ(io.rest(), "4\n5\n");

  FakePipeIo timed;
  timed.arrive(0s, "1\n2\n3\n");
  options = lines_per_second(1, 1);
  options.longest_wait = 500ms;
  EXPECT_EQ(Engine(options, timed).run().ending, Ending::wait_too_long);
  EXPECT_EQ(timed.output(), "1\n");
  EXPECT_EQ(timed.rest(), "2\n3\n");
}

// Bytes that cannot be spliced (a terminal, a socket) the same way: a chunk is read only once its
// turn is granted, so that a refused turn has read nothing; what is written is what was granted.
TEST(PipeEngine, BytesThatCannotBeSplicedAreReadOnlyOnceTheirTurnIsGranted) {
  FakePipeIo io;
  io.arrive(0s, std::string(100, 'x'));
  EngineOptions options = bytes_per_second(1000, 10);
  options.quotas = {{.limit = 25, .period = 1h}};
  options.stop_at_quota = true;
  EXPECT_EQ(Engine(options, io).run().ending, Ending::quota_spent);
  EXPECT_EQ(io.output(), std::string(20, 'x'));
  EXPECT_EQ(io.rest(), std::string(80, 'x'));

  FakePipeIo timed;
  timed.arrive(0s, std::string(20, 'x'));
  options = bytes_per_second(10, 5);
  options.longest_wait = 200ms;
  EXPECT_EQ(Engine(options, timed).run().ending, Ending::wait_too_long);
  EXPECT_EQ(timed.output(), std::string(5, 'x'));
  EXPECT_EQ(timed.rest(), std::string(15, 'x'));
}

// The zero-copy path waits in another order (the bucket first, then the input); both keep the
// same schedule.
class BothPaths : public ::testing::TestWithParam<bool> {
 protected:
  BothPaths() {
    if (GetParam()) io.allow_splice();
  }
  FakePipeIo io;
};
INSTANTIATE_TEST_SUITE_P(PipeEngine, BothPaths, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Spliced" : "Buffered"; });

TEST_P(BothPaths, ASlowProducerIsNotDelayedFurther) {
  io.arrive(0ms, "aa");
  io.arrive(500ms, "bb");
  io.arrive(1200ms, "cc");
  Engine(bytes_per_second(10, 2), io).run();
  EXPECT_EQ(io.writes(), (std::vector<Write>{{0ms, "aa"}, {500ms, "bb"}, {1200ms, "cc"}}));
}

TEST_P(BothPaths, StoredPermitsAllowABurstAfterAPause) {
  io.arrive(0ms, "a");
  io.arrive(2s, "bcd");
  // One second of permits (10) is stored during the pause: the three bytes go at once.
  Engine(bytes_per_second(10, 1), io).run();
  EXPECT_EQ(io.writes(),
            (std::vector<Write>{{0ms, "a"}, {2000ms, "b"}, {2000ms, "c"}, {2000ms, "d"}}));
}

TEST_P(BothPaths, TimerSlackDoesNotAddUpWhileWarmingUp) {
  EngineOptions options = bytes_per_second(10, 1);
  options.bucket.shape = BucketShape::warming_up;
  options.bucket.warmup = 2s;
  FakePipeIo punctual;
  if (GetParam()) punctual.allow_splice();
  punctual.arrive(0s, std::string(30, 'w'));
  Engine(options, punctual).run();
  // Every wait ends 1 ms late; every write is then 1 ms late, never more: the schedule stays on
  // its absolute times, and the lateness is not taken for idle time that cools the bucket.
  io.oversleep_by(1ms);
  io.arrive(0s, std::string(30, 'w'));
  Engine(options, io).run();
  ASSERT_EQ(io.writes().size(), punctual.writes().size());
  EXPECT_EQ(io.writes()[0].time, punctual.writes()[0].time);
  for (std::size_t i = 1; i < io.writes().size(); ++i)
    EXPECT_EQ(io.writes()[i].time, punctual.writes()[i].time + 1ms) << "write " << i;
}

// --pay-first: each chunk waits until its own bytes exist, so the first one too, and nothing is
// owed at the end.
TEST_P(BothPaths, PayFirstWaitsForEachChunkBeforeWritingIt) {
  EngineOptions options = bytes_per_second(1000, 20);
  options.bucket.pay_first = true;
  io.arrive(0s, std::string(60, 'f'));
  Engine(options, io).run();
  const std::string chunk(20, 'f');
  EXPECT_EQ(io.writes(), (std::vector<Write>{{20ms, chunk}, {40ms, chunk}, {60ms, chunk}}));
}

// With no burst a chunk's units cannot be stored: each waits for its own, once. (Spliced only:
// where splicing turns out impossible, the wait for the first turn is taken before the engine
// falls back to read and write, which then waits for it again.)
TEST(PipeEngine, PayFirstWithNoBurstWaitsOnceForEachChunkWhenSpliced) {
  EngineOptions options = bytes_per_second(1000, 20);
  options.bucket.max_burst_seconds = 0.0;
  options.bucket.pay_first = true;
  FakePipeIo io;
  io.allow_splice();
  io.arrive(0s, std::string(60, 'n'));
  Engine(options, io).run();
  const std::string chunk(20, 'n');
  EXPECT_EQ(io.writes(), (std::vector<Write>{{20ms, chunk}, {40ms, chunk}, {60ms, chunk}}));
}

// --start-full --pay-first: the burst (50 bytes) goes at once, then each chunk waits for what the
// stored bytes lack: chunk 3 finds 10 and waits 10 ms for the rest.
TEST_P(BothPaths, StartFullSendsTheBurstAtOnce) {
  EngineOptions options = bytes_per_second(1000, 20);
  options.bucket.max_burst_seconds = 0.05;
  options.bucket.start_full = true;
  options.bucket.pay_first = true;
  io.arrive(0s, std::string(100, 'b'));
  Engine(options, io).run();
  const std::string chunk(20, 'b');
  EXPECT_EQ(io.writes(),
            (std::vector<Write>{
                {0ms, chunk}, {0ms, chunk}, {10ms, chunk}, {30ms, chunk}, {50ms, chunk}}));
}

// On the zero-copy path a chunk found at its turn is asked for at the turn, so late wake-ups do
// not cool a warming-up bucket that pays first. (The read-and-write path reads each chunk after
// the previous write and asks for it then: a late wake-up there counts as idle time, which a
// bursty bucket refills exactly and a warming-up one pays for by a warm-up longer by the slack.)
TEST(PipeEngine, PayFirstTimerSlackDoesNotAddUpWhileWarmingUpWhenSpliced) {
  EngineOptions options = bytes_per_second(10, 1);
  options.bucket.shape = BucketShape::warming_up;
  options.bucket.warmup = 2s;
  options.bucket.pay_first = true;
  FakePipeIo punctual;
  punctual.allow_splice();
  punctual.arrive(0s, std::string(30, 'w'));
  Engine(options, punctual).run();
  FakePipeIo io;
  io.allow_splice();
  io.oversleep_by(1ms);
  io.arrive(0s, std::string(30, 'w'));
  Engine(options, io).run();
  ASSERT_EQ(io.writes().size(), punctual.writes().size());
  for (std::size_t i = 0; i < io.writes().size(); ++i)
    EXPECT_EQ(io.writes()[i].time, punctual.writes()[i].time + 1ms) << "write " << i;
}

TEST(PipeEngine, ChargesOnlyWhatAPartialWriteMoved) {
  FakePipeIo io;
  io.limit_writes_to(3);
  io.arrive(0s, "0123456789");
  // A chunk of 5 goes out as 3 + 2 without a wait inside; the next chunk waits for all 5.
  Engine(bytes_per_second(100, 5), io).run();
  EXPECT_EQ(io.writes(),
            (std::vector<Write>{{0ms, "012"}, {0ms, "34"}, {50ms, "567"}, {50ms, "89"}}));
}

TEST(PipeEngine, LinesAreNeverSplitAndTheLastLineCountsWithoutNewline) {
  FakePipeIo io;
  io.arrive(0s, "a\nbb\nccc\nd");
  const Result result = Engine(lines_per_second(10, 2), io).run();
  EXPECT_EQ(io.writes(), (std::vector<Write>{{0ms, "a\nbb\n"}, {200ms, "ccc\n"}, {300ms, "d"}}));
  EXPECT_EQ(result.totals.units, 4u);
  EXPECT_EQ(result.totals.bytes, 10u);
}

TEST(PipeEngine, ALineArrivingInPiecesIsWrittenWhole) {
  FakePipeIo io;
  io.arrive(0ms, "hel");
  io.arrive(30ms, "lo\nwor");
  io.arrive(60ms, "ld\n");
  Engine(lines_per_second(10, 1), io).run();
  // The 30 ms spent waiting for the first line stored 0.3 permits: the second costs 70 ms.
  EXPECT_EQ(io.writes(), (std::vector<Write>{{30ms, "hello\n"}, {100ms, "world\n"}}));
}

TEST(PipeEngine, ALineLongerThanTheBufferGoesOutWithoutAWaitInside) {
  FakePipeIo io;
  io.arrive(0s, "x\n0123456789abcdefghij\ny\n");
  const Result result = Engine(lines_per_second(10, 1, 8), io).run();
  EXPECT_EQ(io.writes(), (std::vector<Write>{{0ms, "x\n"},
                                             {100ms, "01234567"},
                                             {100ms, "89abcdef"},
                                             {100ms, "ghij\n"},
                                             {200ms, "y\n"}}));
  EXPECT_EQ(result.totals.units, 3u);
}

TEST(PipeEngine, NullRecords) {
  FakePipeIo io;
  io.arrive(0s, std::string("a\0b\0c", 5));
  EngineOptions options = bytes_per_second(4, 1);
  options.unit = Unit{'\0'};
  Engine(options, io).run();
  EXPECT_EQ(io.writes(),
            (std::vector<Write>{
                {0ms, std::string("a\0", 2)}, {250ms, std::string("b\0", 2)}, {500ms, "c"}}));
}

TEST(PipeEngine, AStopSignalWritesWhatIsDueKeepsTheRestAndStopsAtOnce) {
  for (const bool file : {false, true}) {
    SCOPED_TRACE(file ? "from a file" : "from a pipe");
    FakePipeIo io;
    if (file) io.allow_unread();
    io.arrive(0s, "a\nb\nc\n");
    io.stop_at(150ms, SIGTERM);
    // 1 line/s and chunk 1: "a" at 0; "b", read for the next chunk, is not due before 1 s: a file
    // takes it back for its next reader, from a pipe it goes out at the signal rather than be
    // lost; "c" was never read.
    const Result result = Engine(lines_per_second(1, 1), io).run();
    const std::vector<Write> due{{0ms, "a\n"}};
    const std::vector<Write> all_read{{0ms, "a\n"}, {150ms, "b\n"}};
    EXPECT_EQ(io.writes(), file ? due : all_read);
    EXPECT_EQ(io.output() + io.rest(), "a\nb\nc\n");
    EXPECT_EQ(result.ending, Ending::stopped);
    EXPECT_EQ(result.signal, SIGTERM);
    EXPECT_EQ(io.elapsed(), 150ms);
  }
}

TEST(PipeEngine, AStopReleasesNoChunkBeforeItsPermitsAreDue) {
  // Paying first with no burst, 1000 lines at 1 line/s are due after 1000 s.
  std::string lines;
  for (int i = 1; i <= 5000; ++i) lines += std::to_string(i) + "\n";
  for (const std::int64_t chunk : {1, 1000}) {
    SCOPED_TRACE(chunk);
    FakePipeIo io;
    io.allow_unread();
    io.arrive(0s, lines);
    io.stop_at(1500ms, SIGINT);
    EngineOptions options = lines_per_second(1, chunk);
    options.bucket.max_burst_seconds = 0;
    options.bucket.pay_first = true;
    Engine(options, io).run();
    EXPECT_EQ(io.output(), chunk == 1 ? "1\n" : "");
    EXPECT_EQ(io.output() + io.rest(), lines);
  }
}

TEST(PipeEngine, AStopInRecordModesWritesNoMoreThanTheNextChunk) {
  std::string lines;
  for (int i = 1; i <= 300000; ++i) lines += std::to_string(i) + "\n";
  // 5 lines/s: the chunks due by 0.5 s (at 0, 0.2 and 0.4 s; or at 0 for 3 lines), then the
  // next chunk at most.
  for (const auto& [chunk, most] : {std::pair{1, 4}, std::pair{3, 6}}) {
    SCOPED_TRACE(chunk);
    FakePipeIo io;
    io.arrive(0s, lines);
    io.stop_at(500ms, SIGTERM);
    const Result result = Engine(lines_per_second(5, chunk), io).run();
    EXPECT_EQ(result.ending, Ending::stopped);
    EXPECT_LE(result.totals.units, static_cast<std::uint64_t>(most));
    EXPECT_EQ(io.output(), lines.substr(0, io.output().size()));
    EXPECT_EQ(io.output().back(), '\n');
  }
}

TEST(PipeEngine, AStopFinishesARecordAReadCutButWaitsForNoMore) {
  // Reads sized by the shortest line so far (2 bytes) cut "ccc" after its first byte.
  FakePipeIo io;
  io.arrive(0s, "a\nbb\nccc\ndddd\n");
  io.stop_at(500ms, SIGTERM);
  Engine(lines_per_second(1, 1), io).run();
  EXPECT_EQ(io.output(), "a\nbb\nccc\n");

  FakePipeIo slow;
  slow.arrive(0s, "a\nbb\nc");
  slow.arrive(10s, "cc\n");
  slow.stop_at(500ms, SIGTERM);
  Engine(lines_per_second(1, 1), slow).run();
  EXPECT_EQ(slow.output(), "a\nbb\nc");
  EXPECT_EQ(slow.elapsed(), 500ms);
}

TEST(PipeEngine, RecordsOfEveryLengthArriveWholeWhateverTheReadSizes) {
  std::string records;
  for (int i = 0; i < 2000; ++i)
    records += std::string(static_cast<std::size_t>(i * 7919 % 300), 'r') + "\n";
  FakePipeIo io;
  io.arrive(0s, records);
  const Result result = Engine(lines_per_second(1e6, 7, 1024), io).run();
  EXPECT_EQ(io.output(), records);
  EXPECT_EQ(result.totals.units, 2000u);
}

TEST(PipeEngine, AChunkLargerThanTheBufferGrowsItOnlyAsReadsFillIt) {
  FakePipeIo io;
  const std::string data(100000, 'g');
  io.arrive(0s, data);
  EngineOptions options = bytes_per_second(1e9, 900'000'000);
  options.buffer_bytes = 4096;
  Engine(options, io).run();
  EXPECT_EQ(io.output(), data);
  // 4 KiB, 8 KiB, 16 KiB ...: no write took more than was there to read.
  EXPECT_EQ(io.writes().front().data.size(), 4096u);
  EXPECT_EQ(io.writes().size(), 5u);
}

TEST(PipeEngine, AStopDuringABlockedWriteStillWritesWhatWasReadUnlessStoppedAgain) {
  struct Case {
    std::int64_t chunk;
    std::size_t fits;  // bytes the output takes before it is full
    int signals;       // stop signals that cut the waits for room short
    std::string output;
  };
  // "ef" is never read. The chunk read when the first signal came still goes out, whether the
  // signal found the write blocked ("cd") or cut it short after "abc" ("d"); a second signal
  // gives it up.
  for (const Case& c : {Case{2, 2, 1, "abcd"}, Case{4, 3, 1, "abcd"}, Case{2, 2, 2, "ab"}}) {
    SCOPED_TRACE(c.output);
    FakePipeIo io;
    io.arrive(0s, "abcdef");
    io.stop_blocked_writes_after(c.fits, SIGTERM, c.signals);
    const Result result = Engine(bytes_per_second(1000, c.chunk), io).run();
    EXPECT_EQ(io.output(), c.output);
    EXPECT_EQ(result.ending, Ending::stopped);
    EXPECT_EQ(result.signal, SIGTERM);
    EXPECT_EQ(result.totals.bytes, c.output.size());
  }
}

TEST(PipeEngine, AStopWhileSplicingLeavesTheRestUnread) {
  FakePipeIo io;
  io.allow_splice();
  io.arrive(0s, "abcd");
  io.stop_at(1500ms, SIGINT);
  const Result result = Engine(bytes_per_second(1, 1), io).run();
  EXPECT_EQ(io.output(), "ab");
  EXPECT_EQ(result.ending, Ending::stopped);
  EXPECT_EQ(result.signal, SIGINT);
}

TEST(PipeEngine, DownstreamClosingEndsTheTransfer) {
  FakePipeIo io;
  io.close_output_after(30);
  io.arrive(0s, std::string(100, 'z'));
  const Result result = Engine(bytes_per_second(1000, 20), io).run();
  EXPECT_EQ(result.ending, Ending::downstream_closed);
  EXPECT_EQ(io.output(), std::string(30, 'z'));
}

TEST(PipeEngine, ANewRateAppliesFromTheNextChunk) {
  FakePipeIo io;
  io.arrive(0s, std::string(80, 'r'));
  io.new_rate_at(30ms, 2000.0);
  const Result result = Engine(bytes_per_second(1000, 20), io).run();
  // The turn booked at the old rate (40 ms: 10 bytes still owed at 30 ms) is converted to the new
  // rate (5 ms of 2000 B/s), where Guava's setRate would keep it; later chunks cost 10 ms.
  const std::string chunk(20, 'r');
  EXPECT_EQ(io.writes(),
            (std::vector<Write>{{0ms, chunk}, {20ms, chunk}, {35ms, chunk}, {45ms, chunk}}));
  EXPECT_EQ(result.totals.rate, 2000);
}

// The wait for a late producer's first bytes is not stored: the second chunk waits its whole
// cost (with 50 ms stored it would go at 100 ms, two chunks in one 100 ms window).
TEST_P(BothPaths, TheBucketStartsWhenTheFirstInputArrives) {
  io.arrive(50ms, std::string(300, 's'));
  Engine(bytes_per_second(1000, 100), io).run();
  const std::string chunk(100, 's');
  EXPECT_EQ(io.writes(), (std::vector<Write>{{50ms, chunk}, {150ms, chunk}, {250ms, chunk}}));
}

TEST_P(BothPaths, ANewRateResizesTheDefaultChunk) {
  io.arrive(0s, std::string(400, 'c'));
  io.new_rate_at(1ms, 200.0);
  EngineOptions options = bytes_per_second(20000, 0);
  options.default_chunk_limit = 65536;
  options.chunk_interval = 10ms;
  Engine(options, io).run();
  // 200 bytes a chunk at 20 kB/s; at 200 B/s 2 bytes every 10 ms, not 200 bytes every second.
  ASSERT_GE(io.writes().size(), 3u);
  EXPECT_EQ(io.writes()[0], (Write{0ms, std::string(200, 'c')}));
  EXPECT_EQ(io.writes()[1], (Write{10ms, "cc"}));
  EXPECT_EQ(io.writes()[2], (Write{20ms, "cc"}));
}

// --chunk 50ms: a write every 50 ms of the rate in force, before and after a new rate.
TEST_P(BothPaths, AChunkGivenAsATimeIsThatTimeOfTheRate) {
  io.arrive(0s, std::string(1000, 't'));
  io.new_rate_at(120ms, 2000.0);
  EngineOptions options = bytes_per_second(1000, 0);
  options.default_chunk_limit = 65536;
  options.chunk_interval = 50ms;
  Engine(options, io).run();
  const std::vector<Write>& writes = io.writes();
  ASSERT_GE(writes.size(), 5u);
  EXPECT_EQ(writes[0], (Write{0ms, std::string(50, 't')}));
  EXPECT_EQ(writes[1], (Write{50ms, std::string(50, 't')}));
  EXPECT_EQ(writes[2], (Write{100ms, std::string(50, 't')}));
  // Then 100 bytes every 50 ms (once what was read for the old chunk has gone).
  const auto first_large = std::find_if(
      writes.begin(), writes.end(), [](const Write& write) { return write.data.size() == 100; });
  ASSERT_TRUE(first_large != writes.end() && first_large + 1 != writes.end());
  EXPECT_EQ(first_large[1].time - first_large[0].time, 50ms);
  EXPECT_EQ(first_large[1].data.size(), 100u);
}

// A file is read ahead in large reads, not one read per write, on the same schedule; a stop puts
// back what it was not going to write, for the next reader.
TEST(PipeEngine, AnInputThatTakesBackReadsIsReadAheadAndAStopPutsTheRestBack) {
  FakePipeIo io;
  io.allow_unread();
  io.arrive(0s, std::string(1000, 'r'));
  io.stop_at(45ms, SIGTERM);
  const Result result = Engine(bytes_per_second(1000, 10), io).run();
  const std::string chunk(10, 'r');
  // Due at 0, 10, 20, 30 and 40 ms, all from one read; the 950 bytes not due go back.
  EXPECT_EQ(io.writes(),
            (std::vector<Write>{
                {0ms, chunk}, {10ms, chunk}, {20ms, chunk}, {30ms, chunk}, {40ms, chunk}}));
  EXPECT_EQ(io.reads(), 1u);
  EXPECT_EQ(result.ending, Ending::stopped);
  EXPECT_EQ(io.bytes_read(), 50u);
}

TEST(PipeEngine, AnInputThatTakesBackReadsNeedsOneReadForManyWrites) {
  FakePipeIo io;
  io.allow_unread();
  io.arrive(0s, std::string(100, 'r'));
  Engine(bytes_per_second(1000, 10), io).run();
  EXPECT_EQ(io.output(), std::string(100, 'r'));
  EXPECT_EQ(io.writes().size(), 10u);
  EXPECT_EQ(io.writes().back().time, 90ms);
  EXPECT_LE(io.reads(), 2u);  // the data, and the end
}

// Rates from given times on, as a timetable on the engine's clock would give them.
class SteppedSchedule final : public RateSchedule {
 public:
  SteppedSchedule(const FakePipeIo& io,
                  std::vector<std::pair<std::chrono::nanoseconds, double>> steps)
      : start_(io.start()), steps_(std::move(steps)) {}
  RatePeriod at(std::chrono::nanoseconds now) override {
    RatePeriod period{steps_.front().second, std::chrono::nanoseconds::max()};
    for (const auto& [after, rate] : steps_) {
      if (start_ + after > now) {
        period.until = start_ + after;
        break;
      }
      period.units_per_second = rate;
    }
    return period;
  }
  void follow(std::optional<Timetable>) override { ADD_FAILURE() << "no timetable is sent"; }

 private:
  std::chrono::nanoseconds start_;
  std::vector<std::pair<std::chrono::nanoseconds, double>> steps_;
};

TEST(PipeEngine, ScheduledRateTakesOverAtItsTimeEvenWhileWaiting) {
  FakePipeIo io;
  io.arrive(0s, "1\n2\n3\n4\n5\n");
  SteppedSchedule schedule(io, {{0s, 10.0}, {150ms, 100.0}});
  EngineOptions options = lines_per_second(10, 1);
  options.schedule = &schedule;
  const Result result = Engine(options, io).run();
  // The turn booked at 10/s (200 ms) stands, as with set; then 10 ms a line.
  EXPECT_EQ(io.writes(),
            (std::vector<Write>{
                {0ms, "1\n"}, {100ms, "2\n"}, {200ms, "3\n"}, {210ms, "4\n"}, {220ms, "5\n"}}));
  EXPECT_EQ(result.rate_changes, (std::vector<RateChange>{{io.start() + 150ms, 100.0}}));
  EXPECT_EQ(result.totals.rate, 100.0);
}

TEST(PipeEngine, LeavingNoLimitStartsAnEmptyBucket) {
  FakePipeIo io;
  io.arrive(0s, "a\nb\nc\n");
  io.arrive(100ms, "d\ne\nf\n");
  SteppedSchedule schedule(io, {{0s, std::numeric_limits<double>::infinity()}, {100ms, 10.0}});
  EngineOptions options = lines_per_second(10, 1);
  options.schedule = &schedule;
  Engine(options, io).run();
  // Guava's setRate would leave the bucket full after infinity: d, e and f at once.
  EXPECT_EQ(io.writes(), (std::vector<Write>{{0ms, "a\n"},
                                             {0ms, "b\n"},
                                             {0ms, "c\n"},
                                             {100ms, "d\n"},
                                             {200ms, "e\n"},
                                             {300ms, "f\n"}}));
}

TEST(PipeEngine, EnteringNoLimitDropsTheTurnBookedAtTheOldRate) {
  FakePipeIo io;
  io.arrive(0s, "a\nb\nc\n");
  SteppedSchedule schedule(io, {{0s, 1.0 / 3600}, {10s, std::numeric_limits<double>::infinity()}});
  EngineOptions options = lines_per_second(1.0 / 3600, 1);
  options.schedule = &schedule;
  Engine(options, io).run();
  // Guava's setRate would keep b waiting until the hour booked for it at 1/h is over.
  EXPECT_EQ(io.writes(), (std::vector<Write>{{0ms, "a\n"}, {10s, "b\n"}, {10s, "c\n"}}));
}

TEST(PipeEngine, ARateSetByHandHoldsUntilTheScheduleMovesOn) {
  FakePipeIo io;
  io.arrive(0s, std::string(200, 'h'));
  io.new_rate_at(30ms, 2000.0);
  SteppedSchedule schedule(io, {{0s, 1000.0}, {100ms, 500.0}});
  EngineOptions options = bytes_per_second(1000, 20);
  options.schedule = &schedule;
  const Result result = Engine(options, io).run();
  std::vector<std::chrono::nanoseconds> times;
  for (const Write& write : io.writes()) times.push_back(write.time);
  // The turn booked for 40 ms is converted by the set (35 ms); the schedule's entry at 100 ms
  // keeps the turn booked then (105 ms), as Guava's setRate.
  EXPECT_EQ(times, (std::vector<std::chrono::nanoseconds>{0ms, 20ms, 35ms, 45ms, 55ms, 65ms, 75ms,
                                                          85ms, 95ms, 105ms}));
  EXPECT_EQ(result.rate_changes,
            (std::vector<RateChange>{{io.start() + 30ms, 2000.0}, {io.start() + 100ms, 500.0}}));
}

TEST(PipeEngine, WarmingUpStartsSlowAndReachesTheRate) {
  FakePipeIo io;
  io.arrive(0s, std::string(40, 'w'));
  EngineOptions options = bytes_per_second(10, 1);
  options.bucket.shape = BucketShape::warming_up;
  options.bucket.warmup = 2s;
  options.bucket.cold_factor = 3.0;
  Engine(options, io).run();
  const std::vector<Write>& writes = io.writes();
  ASSERT_EQ(writes.size(), 40u);
  // Cold: the first gap is close to cold_factor / rate; once warm, exactly 1 / rate.
  EXPECT_NEAR(std::chrono::duration<double>(writes[1].time - writes[0].time).count(), 0.3, 0.02);
  EXPECT_EQ(writes[39].time - writes[38].time, 100ms);
}

TEST(PipeEngine, ReportsProgressEveryIntervalAndAtTheEnd) {
  FakePipeIo io;
  io.arrive(0s, std::string(50, 'p'));
  std::vector<std::pair<std::chrono::nanoseconds, std::uint64_t>> reports;
  Engine(bytes_per_second(100, 10), io, [&](const Totals& totals) {
    reports.emplace_back(totals.now - io.start(), totals.bytes);
  }).run();
  // Writes at 0, 100, 200, 300, 400 ms; ticks at 100, 200, 300, 400 ms come before their write.
  EXPECT_EQ(reports, (std::vector<std::pair<std::chrono::nanoseconds, std::uint64_t>>{
                         {100ms, 10}, {200ms, 20}, {300ms, 30}, {400ms, 40}, {400ms, 50}}));
}

// --stop-at-quota: a turn that a quota holds back ends the run, the rest of a file unread and
// what a pipe still holds left in it; the turns the rate holds are waited for.
TEST_P(BothPaths, ATurnAQuotaHoldsEndsTheRunWhenAskedTo) {
  // Read and written, the input gives back what was read only as a file does.
  if (!GetParam()) io.allow_unread();
  io.arrive(0s, std::string(100, 'x'));
  EngineOptions options = bytes_per_second(1000, 20);
  options.quotas = {{.limit = 40, .period = 1h}};
  options.stop_at_quota = true;
  const Result result = Engine(options, io).run();
  EXPECT_EQ(result.ending, Ending::quota_spent);
  EXPECT_GT(result.refused_wait, 59min);
  EXPECT_EQ(io.output(), std::string(40, 'x'));
  EXPECT_EQ(io.rest(), std::string(60, 'x'));
  EXPECT_EQ(io.elapsed(), 20ms);
}

}  // namespace
}  // namespace ratelimit::pipe
