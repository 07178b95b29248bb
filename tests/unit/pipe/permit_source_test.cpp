// The pipe engine on a shared bucket (SharedPermitSource) against a fake store: the same schedule
// as a bucket of its own, a late store hidden behind the waits, credit kept for units booked and
// not moved, the parameter policy, and a store that fails or is interrupted.
#include "pipe/permit_source.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <optional>
#include <vector>

#include "errors.hpp"
#include "fake_pipe_io.hpp"
#include "format/timetable_text.hpp"
#include "memory_store.hpp"
#include "pipe/engine.hpp"
#include "stores/fallback_store.hpp"

namespace ratelimit::pipe {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using testing::FakePipeIo;

// The store's side on the fake I/O's clock, which can also fail, be interrupted or answer late.
class FakeStore final : public testing::MemoryStore {
 public:
  explicit FakeStore(FakePipeIo& io) : MemoryStore(io), io_(io) {}
  stores::Reservation reserve(const stores::PermitRequest& request, io::Waiter& waiter) override {
    if (fail || ++calls_seen == fail_from_call) fail = true;
    if (fail) throw StoreUnavailable("store gone");
    if (interrupt_with != 0) return {.granted = false, .wait = {}, .signal = interrupt_with};
    const stores::Reservation reservation = MemoryStore::reserve(request, waiter);
    if (other_pipe_chunk > 0) {
      // Another pipe on the key books its next chunk right after this one.
      stores::PermitRequest other = request;
      other.apply_params = false;
      other.permits = other_pipe_chunk;
      stores::decide(*bucket, schedule, quotas, other, io_.now());
    }
    io_.pass(latency);
    return reservation;
  }

  bool give_back(const stores::UnusedPermits& unused) override {
    if (fail_give_back) throw UnsafeStateError("record gone bad");
    return MemoryStore::give_back(unused);
  }

  nanoseconds latency{0};
  std::int64_t other_pipe_chunk = 0;  // booked by another pipe after each booking; 0: none
  bool fail = false;
  bool fail_give_back = false;
  int fail_from_call = 0;  // counted from 1; 0: never
  int calls_seen = 0;
  int interrupt_with = 0;

 private:
  FakePipeIo& io_;
};

EngineOptions bytes_per_second(double rate, std::int64_t chunk) {
  EngineOptions options;
  options.bucket.permits_per_second = rate;
  options.chunk_units = chunk;
  return options;
}

class SharedEngine : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) io.allow_splice();
  }
  Result run(const EngineOptions& options, const stores::KeySchedule& schedule = {}) {
    stores::PermitRequest request;
    request.key = "k";
    request.params = options.bucket;
    request.quotas = options.quotas;
    request.schedule = schedule;
    SharedPermitSource source(
        store, request, waiter,
        [this](const std::string&, const stores::KeySettings&) { ++followed; },
        [this, &options](const std::string&, const std::string& timetable) {
          key_timetables.push_back(timetable);
          options.schedule->follow(format::parse_timetable_text(timetable));
        },
        [this](const std::string& warning) { warnings.push_back(warning); },
        [this](const std::string&, nanoseconds waited) { pauses.push_back(waited); });
    const Result result = Engine(options, io, source).run();
    booked_unused = source.booked_unused();
    return result;
  }

  // A new input, from a file (it takes back what was read) or a pipe, and a new bucket.
  void start_again(bool file) {
    FakePipeIo fresh;
    std::swap(io, fresh);
    store.bucket.reset();
    store.quotas.clear();
    store.noticed = 0;
    store.fail = false;
    store.calls_seen = 0;
    if (GetParam()) io.allow_splice();
    if (file) io.allow_unread();
  }

  // `bytes` at 1000/s in default chunks of 5 bytes; at the third booking another user (`set
  // --key`) gives the key `rate`.
  Result run_with_rate_set_elsewhere(double rate, std::size_t bytes) {
    EngineOptions options = bytes_per_second(1000, 5);
    options.default_chunk_limit = 1 << 20;
    options.chunk_interval = 10ms;
    store.other_user_at_call = 3;
    store.other_user_rate = rate;
    io.arrive(0s, std::string(bytes, 'x'));
    return run(options);
  }

  FakePipeIo io;
  FakeStore store{io};
  testing::IoClockWaiter waiter{io};
  int followed = 0;                         // told that it follows the key's settings
  std::vector<std::string> key_timetables;  // as the source was told them
  std::vector<std::string> warnings;
  std::vector<nanoseconds> pauses;  // said by the source: this pipe waited for the key's pause
  std::int64_t booked_unused = 0;
};

INSTANTIATE_TEST_SUITE_P(BothPaths, SharedEngine, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "spliced" : "buffered"; });

TEST_P(SharedEngine, SameScheduleAsABucketOfItsOwn) {
  FakePipeIo alone;
  if (GetParam()) alone.allow_splice();
  alone.arrive(0s, std::string(100, 'x'));
  Engine(bytes_per_second(1000, 20), alone).run();
  io.arrive(0s, std::string(100, 'x'));
  run(bytes_per_second(1000, 20));
  EXPECT_EQ(io.writes(), alone.writes());
}

TEST_P(SharedEngine, ALateStoreDelaysNoTurn) {
  store.latency = 3ms;
  io.arrive(0s, std::string(200, 'x'));
  run(bytes_per_second(1000, 20));
  ASSERT_EQ(io.writes().size(), 10u);
  // Every answer comes 3 ms late, and the chunks go 20 ms apart: each is written once the key has
  // answered the booking ahead made at its turn, and nothing accumulates. The last books nothing
  // ahead, so goes at its turn.
  for (std::size_t i = 1; i + 1 < io.writes().size(); ++i)
    EXPECT_EQ(io.writes()[i].time - io.writes()[i - 1].time, 20ms) << i;
  EXPECT_EQ(io.writes().back().time - io.writes().front().time, 9 * 20ms - 3ms);
}

// 200 bytes at 1000/s in chunks of 20 while another user reports a throttle with Retry-After
// 1 s at 50 ms: the chunk whose turn comes at 60 ms was booked (with the one ahead) before the
// pause began, and nothing goes out until the pause ends at 1050 ms. The booking ahead made at
// each turn is the check: the store is asked no more than one booking per chunk, and for the
// pause once, by the last chunk, which books nothing ahead. The pause is said once.
TEST_P(SharedEngine, NothingGoesOutDuringAPauseThatBeganAfterTheBooking) {
  store.throttle_at = io.start() + 50ms;
  store.retry_after = 1s;
  io.arrive(0s, std::string(200, 'x'));
  EngineOptions options = bytes_per_second(1000, 20);
  const Result result = run(options);
  EXPECT_EQ(result.ending, Ending::end_of_input);
  EXPECT_EQ(io.output(), std::string(200, 'x'));
  std::size_t before_pause = 0;
  for (const testing::FakePipeIo::Write& write : io.writes()) {
    const nanoseconds at = write.time;  // from the start
    EXPECT_TRUE(at < 50ms || at >= 1050ms) << at.count();
    if (at < 50ms) before_pause += write.data.size();
  }
  EXPECT_EQ(before_pause, 60u);
  EXPECT_LE(store.calls, 12);
  EXPECT_LE(store.pause_asked, 1);
  ASSERT_EQ(pauses.size(), 1u);
  EXPECT_GE(pauses.front(), 990ms);
  EXPECT_LE(pauses.front(), 1000ms);
}

// The same pause with --timeout 500ms: the turn after the pause is too far, and the run ends
// with what was written before the pause; the chunk whose turn the pause took is not read
// (spliced, or from an input that cannot take it back).
TEST_P(SharedEngine, APauseBeyondTheLongestWaitEndsTheRunWithTheRestUnread) {
  store.throttle_at = io.start() + 50ms;
  store.retry_after = 1s;
  io.arrive(0s, std::string(200, 'x'));
  EngineOptions options = bytes_per_second(1000, 20);
  options.longest_wait = 500ms;
  const Result result = run(options);
  EXPECT_EQ(result.ending, Ending::wait_too_long);
  EXPECT_EQ(io.output(), std::string(60, 'x'));
  EXPECT_EQ(io.rest(), std::string(140, 'x'));
  EXPECT_TRUE(pauses.empty());
}

TEST_P(SharedEngine, UnitsBookedAndNotMovedAreCreditNeverBookedTwice) {
  // A slow producer: 7 bytes every 50 ms, chunks of 20.
  std::string all;
  for (int i = 0; i < 10; ++i) {
    io.arrive(i * 50ms, std::string(7, static_cast<char>('a' + i)));
    all += std::string(7, static_cast<char>('a' + i));
  }
  run(bytes_per_second(1000, 20));
  EXPECT_EQ(io.output(), all);
  EXPECT_EQ(store.booked, 70 + store.given_back);
  EXPECT_EQ(booked_unused, 0);
  // What was booked and not moved: the chunk booked ahead, and less than two more (a short read
  // leaves credit short of a chunk, which the chunk booked ahead then tops up).
  EXPECT_LT(store.given_back, 60);
}

// A quota of 100 an hour and chunks of 6 on the key: nothing is booked before its data is there
// (a 17th chunk of 6 would make 102 and wait the hour), whether the writer closed at once or
// after the last 4 bytes came late; the last 4 go at their turn.
TEST_P(SharedEngine, NothingIsBookedBeforeItsDataIsThere) {
  for (const nanoseconds last_bytes : {0ms, 95ms}) {
    start_again(false);
    store.quotas.clear();
    const std::int64_t booked_before = store.booked;
    io.arrive(0s, std::string(96, 'x'));
    io.arrive(last_bytes, std::string(4, 'y'));
    EngineOptions options = bytes_per_second(1000, 6);
    options.quotas = {{.limit = 100, .period = 1h}};
    run(options);
    EXPECT_EQ(io.output(), std::string(96, 'x') + std::string(4, 'y'));
    EXPECT_LE(io.elapsed(), 100ms) << last_bytes.count();
    EXPECT_EQ(store.booked - booked_before, 100) << last_bytes.count();
  }
}

// Without quotas too the last chunk is booked no larger than the input is known to hold: the
// key's next booking follows at once, so that pipes that end on a key leave no turn idle.
TEST_P(SharedEngine, WithoutQuotasTheLastChunkIsBookedExactly) {
  io.arrive(0s, std::string(100, 'x'));
  run(bytes_per_second(1000, 6));
  EXPECT_EQ(io.output(), std::string(100, 'x'));
  EXPECT_EQ(store.booked, 100);
  EXPECT_EQ(store.given_back, 0);
}

// A shared pipe's chunk of 108 ms at 1000/s goes in 6 parts of 18 bytes, each at its share of the
// chunk's time; the last chunk, 42 bytes, booked exactly after another pipe's 108, in 3 parts of
// 14 (no part longer than 18). Each part leaves at its place in the booking, so that a short last
// chunk and the next pipe's booking on the key never share a 100 ms window whole.
TEST_P(SharedEngine, ChunksAreWrittenInPartsSpreadOverTheirTime) {
  if (!GetParam()) GTEST_SKIP() << "parts are written where the pipe splices";
  io.allow_unread();
  store.other_pipe_chunk = 108;
  io.arrive(0s, std::string(150, 'x'));
  EngineOptions options = bytes_per_second(1000, 108);
  options.writes_per_chunk = 6;
  run(options);
  EXPECT_EQ(io.output(), std::string(150, 'x'));
  EXPECT_EQ(store.booked, 150);
  EXPECT_EQ(store.given_back, 0);
  const std::vector<nanoseconds> times = {0ms, 18ms, 36ms, 54ms, 72ms, 90ms, 216ms, 230ms, 244ms};
  ASSERT_EQ(io.writes().size(), times.size());
  for (std::size_t i = 0; i < times.size(); ++i) {
    EXPECT_EQ(io.writes()[i].data.size(), i < 6 ? 18u : 14u) << i;
    EXPECT_EQ(io.writes()[i].time - io.writes().front().time, times[i]) << i;
  }
}

// 50 bytes in chunks of 20 while another pipe books after each of this pipe's bookings: whether
// the writer closed at once or the input is a file, the end is known, so no chunk is booked ahead
// past it (none could go back once the other pipe booked after it: the key would idle through
// it). The last chunk, 10 bytes, is booked exactly.
TEST_P(SharedEngine, NoChunkIsBookedAheadPastAKnownEnd) {
  for (const bool file : {false, true}) {
    start_again(file);
    const std::int64_t booked_before = store.booked;
    const std::int64_t given_back_before = store.given_back;
    store.other_pipe_chunk = 20;
    io.arrive(0s, std::string(50, 'x'));
    run(bytes_per_second(1000, 20));
    EXPECT_EQ(io.output(), std::string(50, 'x'));
    EXPECT_EQ(store.booked - booked_before, 50) << file;
    EXPECT_EQ(store.given_back - given_back_before, 0) << file;
  }
}

TEST_P(SharedEngine, AtRatesAboveWhatAChunkHoldsTheStoreIsAskedForBlocks) {
  // 1 MB/s in chunks of 100 bytes (as a pipe's capacity caps them at high rates): bookings of
  // 10 ms of the rate, 10000 bytes, so 40000 bytes take a handful of calls, not 400.
  io.arrive(0s, std::string(40000, 'x'));
  run(bytes_per_second(1e6, 100));
  EXPECT_EQ(io.output().size(), 40000u);
  EXPECT_LE(store.calls, 6);
  EXPECT_EQ(store.booked, 40000 + store.given_back);
  EXPECT_LE(store.given_back, 20000);
}

// The key owns its settings: no booking applies the pipe's, which follows the key's 500/s (100
// bytes in 5 chunks of 20, the first free: 160 ms, where 1000/s would take 80) and is told once.
TEST_P(SharedEngine, EveryBookingKeepsTheKeysSettingsAndIsToldOnce) {
  io.arrive(0s, std::string(100, 'x'));
  store.bucket.emplace(bytes_per_second(500, 20).bucket, io.now());
  run(bytes_per_second(1000, 20));
  ASSERT_GE(store.applied.size(), 2u);
  for (std::size_t i = 0; i < store.applied.size(); ++i) EXPECT_FALSE(store.applied[i]) << i;
  EXPECT_EQ(followed, 1);
  EXPECT_GE(io.elapsed(), 150ms);
}

TEST_P(SharedEngine, ARateSetElsewhereIsFollowedChunksIncluded) {
  const Result result = run_with_rate_set_elsewhere(100.0, 100);
  ASSERT_EQ(result.rate_changes.size(), 1u);
  EXPECT_EQ(result.rate_changes.front().rate, 100.0);
  EXPECT_EQ(result.totals.rate, 100.0);
  // Then one byte every 10 ms, not five every 50 ms.
  const auto& writes = io.writes();
  for (std::size_t i = writes.size() - 5; i < writes.size(); ++i) {
    EXPECT_EQ(writes[i].data.size(), 1u) << i;
    EXPECT_EQ(writes[i].time - writes[i - 1].time, 10ms) << i;
  }
}

TEST_P(SharedEngine, AfterADropInRateNoChunkSizedForTheOldRateHoldsTheKey) {
  // At 10/s, a chunk of 5 booked for the old rate would hold the key for 0.5 s.
  run_with_rate_set_elsewhere(10.0, 40);
  EXPECT_EQ(io.output().size(), 40u);
  const auto& writes = io.writes();
  for (std::size_t i = 1; i < writes.size(); ++i)
    EXPECT_LE(writes[i].time - writes[i - 1].time, 100ms) << i;
  EXPECT_GT(store.given_back, 0);
}

TEST_P(SharedEngine, UnavailableStoreEndsTheRun) {
  store.fail = true;
  io.arrive(0s, "data");
  EXPECT_THROW(run(bytes_per_second(1000, 20)), StoreUnavailable);
  EXPECT_EQ(io.output(), "");
  EXPECT_EQ(io.rest(), "data");  // asked before anything is read
}

TEST_P(SharedEngine, AStoreFailingMidRunLosesNothingReadAndWritesWhatWasBooked) {
  const std::string data = std::string(20, 'a') + std::string(20, 'b') + std::string(60, 'c');
  for (const bool file : {false, true}) {
    SCOPED_TRACE(file ? "from a file" : "from a pipe");
    start_again(file);
    io.arrive(0s, data);
    // Calls 1 and 2 book the first chunk and the one ahead; the third, booking ahead again, fails.
    store.fail_from_call = 3;
    EXPECT_THROW(run(bytes_per_second(1000, 20)), StoreUnavailable);
    ASSERT_GE(io.writes().size(), 2u);
    EXPECT_EQ(io.writes()[0], (FakePipeIo::Write{0ms, std::string(20, 'a')}));
    // The chunk booked ahead still goes at its turn.
    EXPECT_EQ(io.writes()[1], (FakePipeIo::Write{20ms, std::string(20, 'b')}));
    EXPECT_EQ(io.output() + io.rest(), data);
    // Nothing more is read once what the store granted is used up.
    EXPECT_EQ(io.output().size(), 40u);
  }
}

// A store that is away between two moments of the fake I/O's clock.
class StoreAway final : public testing::MemoryStore {
 public:
  StoreAway(FakePipeIo& io, nanoseconds from, nanoseconds until)
      : MemoryStore(io), io_(io), from_(from), until_(until) {}
  stores::Reservation reserve(const stores::PermitRequest& request, io::Waiter& waiter) override {
    check();
    const stores::Reservation reservation = MemoryStore::reserve(request, waiter);
    booked_at.push_back(io_.now());
    return reservation;
  }
  void ping(const std::string&, io::Waiter&) override { check(); }
  std::vector<nanoseconds> booked_at;

 private:
  void check() {
    if (io_.now() >= from_ && io_.now() < until_) throw StoreUnavailable("store gone");
  }
  FakePipeIo& io_;
  nanoseconds from_;
  nanoseconds until_;
};

// Background work done at once, as a probe that is answered before the next request.
class DoneAtOnce final : public io::BackgroundTask {
 public:
  bool done() const override { return true; }
};

TEST_P(SharedEngine, APipeBackOnTheKeyAfterAnOutageBooksEachUnitOnce) {
  auto owned_shared = std::make_unique<StoreAway>(io, 300ms, 1200ms);
  StoreAway& shared = *owned_shared;
  testing::MemoryStore* local = nullptr;
  std::vector<std::string> said;
  stores::FallbackStore store(
      std::move(owned_shared), "the store",
      {.action = stores::OnUnavailable::local, .local_share = 1.0, .said_as = {}},
      [&] {
        auto opened = std::make_unique<testing::MemoryStore>(io);
        local = opened.get();
        return opened;
      },
      [&](const std::string& line) { said.push_back(line); },
      [&](std::function<void(io::Waiter&)> work) {
        try {
          work(waiter);
        } catch (const StoreUnavailable&) {
        }
        return std::make_unique<DoneAtOnce>();
      });
  stores::PermitRequest request;
  request.key = "k";
  request.params.permits_per_second = 1000;
  SharedPermitSource source(store, request, waiter);
  const std::string data(3000, 'x');
  io.arrive(0s, data);
  Engine(bytes_per_second(1000, 20), io, source).run();
  EXPECT_EQ(io.output(), data);
  ASSERT_EQ(said.size(), 2U);
  EXPECT_EQ(said[1], "the store answers again; back on the shared bucket 'k'");
  ASSERT_NE(local, nullptr);
  // Asked again a second after it failed, and booked from again once it answered.
  ASSERT_FALSE(shared.booked_at.empty());
  EXPECT_GE(shared.booked_at.back(), 1300ms);
  // Every unit that went out was booked once, in one store or the other.
  EXPECT_EQ(shared.booked + local->booked - shared.given_back - local->given_back,
            static_cast<std::int64_t>(data.size()));
  EXPECT_GT(local->booked, 0);
  // Paced throughout, the outage included.
  EXPECT_GE(io.writes().back().time, 2900ms);
}

TEST_P(SharedEngine, InRecordModesWhatWasReadBeforeTheStoreFailedIsKept) {
  EngineOptions options = bytes_per_second(1000, 2);
  options.unit = Unit{'\n'};
  for (const bool file : {false, true}) {
    SCOPED_TRACE(file ? "from a file" : "from a pipe");
    start_again(file);
    store.fail = true;
    io.arrive(0s, "a\nb\nc\n");
    EXPECT_THROW(run(options), StoreUnavailable);
    EXPECT_EQ(io.output() + io.rest(), "a\nb\nc\n");
    // Records are read to be counted before their permits are asked for.
    EXPECT_EQ(io.output().empty(), file);
  }
}

// The writer closes 50 ms after its data: the chunk and the one ahead were booked whole.
TEST_P(SharedEngine, AGiveBackThatFailsAfterAllDataWentOutIsAWarning) {
  io.arrive(0s, "data");
  io.arrive(50ms, "");
  store.fail_give_back = true;
  const Result result = run(bytes_per_second(1000, 20));
  EXPECT_EQ(result.ending, Ending::end_of_input);
  EXPECT_EQ(io.output(), "data");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings.front(), "key 'k': 36 unused permits not given back: record gone bad");
}

// Two pipes on a key at 1000/s, chunks of 20 (20 ms): each books its chunk and one ahead. A ends
// first: B booked after A's chunk ahead, so nothing of A's goes back (the next booking would move
// up between A's turn and B's). B, the last, gives back its own two.
TEST_P(SharedEngine, APipeThatEndsGivesBackOnlyWhatNoLaterBookingBuiltOn) {
  stores::PermitRequest request;
  request.key = "k";
  request.params = bytes_per_second(1000, 20).bucket;
  SharedPermitSource pipe_a(store, request, waiter);
  SharedPermitSource pipe_b(store, request, waiter);
  ASSERT_EQ(pipe_a.due_time(20, io.now(), std::nullopt), io.now());
  ASSERT_EQ(pipe_a.check_turn(), TurnCheck::holds);
  ASSERT_EQ(pipe_b.due_time(20, io.now(), std::nullopt), io.now() + 40ms);
  ASSERT_EQ(pipe_b.check_turn(), TurnCheck::holds);
  pipe_a.consume(20, io.now(), io.now());
  const nanoseconds key_free = store.bucket->state().next_free;
  pipe_a.finish();
  EXPECT_EQ(store.given_back, 0);
  EXPECT_EQ(store.bucket->state().next_free, key_free);
  pipe_b.finish();
  EXPECT_EQ(store.given_back, 40);
  EXPECT_EQ(store.bucket->state().next_free, key_free - 40ms);
}

// --stop-at-quota on a key whose quota of 40 an hour is spent after 40 bytes: the run ends at the
// turn the quota holds back without booking it, so that the runs after it end at once, write
// nothing and leave the key (its bucket, its quotas' counts) as the first run's last write did.
TEST_P(SharedEngine, ATurnRefusedAtAQuotaBooksNothing) {
  EngineOptions options = bytes_per_second(1000, 20);
  options.quotas = {{.limit = 40, .period = 1h}};
  options.stop_at_quota = true;
  // Read and written, the input gives back what was read only as a file does.
  if (!GetParam()) io.allow_unread();
  io.arrive(0s, std::string(100, 'x'));
  const Result first = run(options);
  EXPECT_EQ(first.ending, Ending::quota_spent);
  EXPECT_GT(first.refused_wait, 59min);
  EXPECT_EQ(io.output(), std::string(40, 'x'));
  const BucketState key_after_first = store.bucket->state();
  const QuotaState counts_after_first = store.quotas.at(0).state();
  const std::int64_t booked_by_first = store.booked - store.given_back;
  EXPECT_EQ(booked_by_first, 40);
  for (int again = 0; again < 3; ++again) {
    FakePipeIo fresh;
    std::swap(io, fresh);
    if (GetParam()) io.allow_splice();
    if (!GetParam()) io.allow_unread();
    io.arrive(0s, std::string(100, 'x'));
    const Result refused = run(options);
    EXPECT_EQ(refused.ending, Ending::quota_spent) << again;
    EXPECT_GT(refused.refused_wait, 59min) << again;
    EXPECT_EQ(io.output(), "") << again;
    EXPECT_EQ(io.elapsed(), 0s) << again;
    EXPECT_EQ(store.bucket->state(), key_after_first) << again;
    EXPECT_EQ(store.quotas.at(0).state(), counts_after_first) << again;
    EXPECT_EQ(store.booked - store.given_back, booked_by_first) << again;
  }
}

// --timeout below the wait for the key's next free moment (another user booked it 2 s ahead):
// the turn is refused without being booked, and the key stays as that user left it.
TEST_P(SharedEngine, ATurnRefusedForItsWaitBooksNothing) {
  EngineOptions options = bytes_per_second(1000, 20);
  options.longest_wait = 500ms;
  store.bucket.emplace(options.bucket, io.now());
  store.bucket->reserve(2000, io.now());
  const BucketState key_before = store.bucket->state();
  io.arrive(0s, std::string(100, 'x'));
  const Result result = run(options);
  EXPECT_EQ(result.ending, Ending::wait_too_long);
  EXPECT_EQ(io.output(), "");
  EXPECT_EQ(store.bucket->state(), key_before);
  EXPECT_EQ(store.booked, 0);
}

TEST_P(SharedEngine, StopSignalDuringTheCallToTheStore) {
  store.interrupt_with = SIGTERM;
  io.arrive(0s, "data");
  const Result result = run(bytes_per_second(1000, 20));
  EXPECT_EQ(result.ending, Ending::stopped);
  EXPECT_EQ(io.output(), "");  // asked before anything is read
}

// Timetables of a key, on a wall clock that starts on Monday at 07:59:59.9 UTC and moves with the
// fake I/O's clock.
class UtcZone final : public TimeZone {
 public:
  std::chrono::seconds utc_offset(std::chrono::sys_seconds) const override { return 0s; }
};
const std::chrono::sys_seconds kMonday =
    std::chrono::sys_days(std::chrono::year(2026) / std::chrono::November / 30);
std::int64_t unix_seconds(std::chrono::sys_seconds time) { return time.time_since_epoch().count(); }

class KeyTimetable : public SharedEngine {
 protected:
  // 20-byte chunks at 1000/s from 18:00 and 2000/s from 08:00.
  const Timetable timetable{{{std::nullopt, 8 * 60, 2000.0}, {std::nullopt, 18 * 60, 1000.0}}};
  const stores::KeySchedule in_the_evening{.timetable = format::timetable_text(timetable),
                                           .entry_until = unix_seconds(kMonday + 8h)};
  UtcZone zone;
  TimetableSchedule schedule_of(std::optional<Timetable> followed, double rate) {
    return TimetableSchedule(std::move(followed), rate, zone,
                             [this] { return kMonday + 8h - 100ms + (io.now() - io.start()); });
  }
  // The times between the last writes.
  std::vector<nanoseconds> last_gaps(std::size_t count) {
    std::vector<nanoseconds> gaps;
    const auto& writes = io.writes();
    for (std::size_t i = writes.size() - count; i < writes.size(); ++i)
      gaps.push_back(writes[i].time - writes[i - 1].time);
    return gaps;
  }
};

INSTANTIATE_TEST_SUITE_P(BothPaths, KeyTimetable, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "spliced" : "buffered"; });

TEST_P(KeyTimetable, TheNextEntryReachesTheKeyWithTheNextBooking) {
  TimetableSchedule followed = schedule_of(timetable, 1000.0);
  EngineOptions options = bytes_per_second(1000, 20);
  options.schedule = &followed;
  io.arrive(0s, std::string(1000, 'x'));
  run(options, in_the_evening);
  EXPECT_EQ(store.schedule.timetable, in_the_evening.timetable);
  EXPECT_EQ(store.schedule.entry_until, unix_seconds(kMonday + 18h));
  EXPECT_EQ(store.bucket->params().permits_per_second, 2000.0);
  EXPECT_EQ(last_gaps(5), std::vector<nanoseconds>(5, 10ms));
  EXPECT_TRUE(key_timetables.empty());
}

TEST_P(KeyTimetable, AnotherUsersTimetableIsFollowed) {
  // Started with one rate; at its third booking the key has a timetable, 2000/s from 08:00.
  TimetableSchedule followed = schedule_of(std::nullopt, 1000.0);
  EngineOptions options = bytes_per_second(1000, 20);
  options.schedule = &followed;
  store.other_user_at_call = 3;
  store.other_user_rate = 1000.0;
  store.other_user_schedule = in_the_evening;
  io.arrive(0s, std::string(1000, 'x'));
  const Result result = run(options);
  EXPECT_EQ(key_timetables, std::vector<std::string>{in_the_evening.timetable});
  ASSERT_EQ(result.rate_changes.size(), 1u);
  EXPECT_EQ(result.rate_changes.front(), (RateChange{io.start() + 100ms, 2000.0}));
  EXPECT_EQ(store.bucket->params().permits_per_second, 2000.0);
  EXPECT_EQ(last_gaps(5), std::vector<nanoseconds>(5, 10ms));
}

TEST_P(KeyTimetable, ATimetableSetByHandGoesToTheKey) {
  TimetableSchedule followed = schedule_of(std::nullopt, 500.0);
  EngineOptions options = bytes_per_second(500, 20);
  options.schedule = &followed;
  io.new_rate_at(30ms, timetable);
  io.arrive(0s, std::string(1000, 'x'));
  run(options);
  EXPECT_EQ(store.schedule.timetable, in_the_evening.timetable);
  EXPECT_EQ(store.bucket->params().permits_per_second, 2000.0);
  EXPECT_TRUE(key_timetables.empty());
}

}  // namespace
}  // namespace ratelimit::pipe
