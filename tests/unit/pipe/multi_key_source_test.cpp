// A pipe on several keys (SharedPermitSource with more keys) against a store of several buckets
// that decides as every store does (stores::decide_all), on a fake clock: each turn is the latest
// any key gives and is booked on every key, a refused turn takes nothing from any key, the end
// gives back to every key, and a pause on any key holds the pipe.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "fake_pipe_io.hpp"
#include "memory_store.hpp"
#include "pipe/engine.hpp"
#include "pipe/permit_source.hpp"
#include "stores/multi_key.hpp"

namespace ratelimit::pipe {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using testing::FakePipeIo;

// Buckets of several keys in memory, on the fake I/O's clock.
class KeysStore final : public stores::BucketStore {
 public:
  struct Kept {
    TokenBucket bucket;
    stores::KeySchedule schedule;
    std::vector<Quota> quotas;
    BackoffState backoff{};
    std::int64_t booked = 0;
    std::int64_t given_back = 0;
  };

  explicit KeysStore(FakePipeIo& io) : io_(io) {}

  stores::Reservation reserve(const stores::PermitRequest& request, io::Waiter&) override {
    ++single_key_calls;
    Kept& key = kept(request);
    stores::Reservation reservation =
        stores::decide(key.bucket, key.schedule, key.quotas, request, io_.now(), key.backoff);
    if (reservation.granted) key.booked += request.permits;
    return reservation;
  }
  stores::KeysReservation reserve_all(const std::vector<stores::PermitRequest>& requests,
                                      io::Waiter&) override {
    ++calls_over_keys;
    std::vector<stores::KeyInCall> in_call;
    for (const stores::PermitRequest& request : requests) {
      Kept& key = kept(request);
      in_call.push_back({.bucket = key.bucket,
                         .schedule = key.schedule,
                         .quotas = key.quotas,
                         .request = request,
                         .backoff = key.backoff});
    }
    stores::KeysReservation decision = stores::decide_all(in_call, io_.now());
    if (decision.call.granted)
      for (const stores::PermitRequest& request : requests)
        keys.at(request.key).booked += request.permits;
    return decision;
  }
  bool set_rate(const stores::RateChange&) override { return false; }
  std::vector<stores::BucketStatus> status(const std::optional<std::string>&) override {
    return {};
  }
  bool reset(const std::string&) override { return false; }
  bool give_back(const stores::UnusedPermits& unused) override {
    Kept& key = keys.at(unused.key);
    const bool moved = stores::give_back(key.bucket, unused.permits, io_.now(), unused.booked);
    if (moved) key.given_back += unused.permits;
    return moved;
  }
  nanoseconds pause_left(const std::string& name) override {
    const auto key = keys.find(name);
    if (key == keys.end()) return nanoseconds::zero();
    return std::max(key->second.backoff.paused_until - io_.now(), nanoseconds::zero());
  }

  // Another user books `permits` on `name` now (its bucket made at `rate` if new).
  void book_elsewhere(const std::string& name, double rate, std::int64_t permits) {
    stores::PermitRequest request;
    request.key = name;
    request.params.permits_per_second = rate;
    request.permits = permits;
    Kept& key = kept(request);
    stores::decide(key.bucket, key.schedule, key.quotas, request, io_.now(), key.backoff);
  }

  // Another user of `name` reports a throttle now with this Retry-After: the key pauses.
  void throttle(const std::string& name, nanoseconds retry_after) {
    Kept& key = keys.at(name);
    BucketState state = key.bucket.state();
    record_throttle(key.backoff, state, key.bucket.params().permits_per_second,
                    {.sent_at = io_.now(), .retry_after = retry_after}, io_.now());
    key.bucket = TokenBucket(key.bucket.params(), state);
  }

  std::map<std::string, Kept> keys;
  int single_key_calls = 0;
  int calls_over_keys = 0;

 private:
  Kept& kept(const stores::PermitRequest& request) {
    auto key = keys.find(request.key);
    if (key == keys.end()) {
      std::vector<Quota> quotas;
      for (const QuotaParams& quota : request.quotas) quotas.emplace_back(quota, io_.now());
      key = keys.emplace(request.key, Kept{.bucket = TokenBucket(request.params, io_.now()),
                                           .schedule = request.schedule,
                                           .quotas = std::move(quotas)})
                .first;
    }
    return key->second;
  }

  FakePipeIo& io_;
};

stores::PermitRequest key_at(const std::string& name, double rate) {
  stores::PermitRequest request;
  request.key = name;
  request.params.permits_per_second = rate;
  return request;
}

EngineOptions bytes_per_second(double rate, std::int64_t chunk) {
  EngineOptions options;
  options.bucket.permits_per_second = rate;
  options.chunk_units = chunk;
  return options;
}

class MultiKeyPipe : public ::testing::Test {
 protected:
  // `data`, all there at once, through a pipe at 1000/s in chunks of `chunk` on "host" that also
  // takes from "all" at `all_rate`: it must reach its end and write `data` whole.
  Result run_all_of(const std::string& data, std::int64_t chunk, double all_rate) {
    io.arrive(0s, data);
    io.arrive(0s, "");
    const Result result = run(bytes_per_second(1000, chunk), all_rate);
    EXPECT_EQ(result.ending, Ending::end_of_input);
    EXPECT_EQ(io.output(), data);
    return result;
  }
  // A pipe at 1000/s on "host" that also takes from "all" at `all_rate`.
  Result run(EngineOptions options, double all_rate) {
    stores::PermitRequest all = key_at("all", all_rate);
    all.schedule = all_schedule;
    SharedPermitSource source(
        store, key_at("host", options.bucket.permits_per_second), waiter, {},
        [this](const std::string& key, const std::string& timetable) {
          key_timetables.emplace_back(key, timetable);
        },
        {},
        [this](const std::string& key, nanoseconds waited) { pauses.emplace_back(key, waited); },
        {all});
    return Engine(options, io, source).run();
  }

  FakePipeIo io;
  KeysStore store{io};
  testing::IoClockWaiter waiter{io};
  std::vector<std::pair<std::string, nanoseconds>> pauses;
  stores::KeySchedule all_schedule{};  // of "all"
  // Each key whose timetable was found to be another than the one followed, and that timetable.
  std::vector<std::pair<std::string, std::string>> key_timetables;
};

// A timetable of 100/s until `second_entry` (its entry ends at Unix second 1000), then 10000/s.
class TwoEntries final : public RateSchedule {
 public:
  explicit TwoEntries(nanoseconds second_entry) : second_entry_(second_entry) {}
  RatePeriod at(nanoseconds now) override {
    if (now < second_entry_)
      return {.units_per_second = 100, .until = second_entry_, .entry_until = 1000};
    return {.units_per_second = 10000, .entry_until = 2000};
  }
  void follow(std::optional<Timetable>) override {}

 private:
  nanoseconds second_entry_;
};

// "all" at 500/s is the slower key: every chunk waits for it, and "host" books the same chunks,
// so neither key is ever ahead of the other; --stats names "all" as the key that held the pipe.
TEST_F(MultiKeyPipe, EachTurnIsTheSlowestKeysAndIsBookedOnEveryKey) {
  const std::string data(1000, 'x');
  const Result result = run_all_of(data, 100, 500);
  EXPECT_EQ(store.single_key_calls, 0);
  EXPECT_GT(store.calls_over_keys, 0);
  // Guava's first chunk is free: 900 bytes at 500/s.
  EXPECT_GE(io.writes().back().time, 1800ms);
  EXPECT_LT(io.writes().back().time, 1900ms);
  for (const char* key : {"host", "all"}) {
    SCOPED_TRACE(key);
    const KeysStore::Kept& kept = store.keys.at(key);
    EXPECT_EQ(kept.booked - kept.given_back, static_cast<std::int64_t>(data.size()));
  }
  ASSERT_EQ(result.totals.held_by_keys.count("all"), 1U);
  EXPECT_GT(result.totals.held_by_keys.at("all"), 1500ms);
  EXPECT_EQ(result.totals.held_by_keys.count("host"), 0U);
}

// Another user holds "all" for 5 s; --timeout 1s refuses the turn: nothing is taken from "host"
// either, and the run names "all" as the key that refused it.
TEST_F(MultiKeyPipe, ARefusedTurnTakesNothingFromAnyKey) {
  store.book_elsewhere("all", 1000, 1);
  store.book_elsewhere("all", 1000, 5000);
  const nanoseconds all_free = store.keys.at("all").bucket.state().next_free;
  io.arrive(0s, std::string(100, 'x'));
  EngineOptions options = bytes_per_second(1000, 100);
  options.longest_wait = 1s;
  const Result result = run(options, 1000);
  EXPECT_EQ(result.ending, Ending::wait_too_long);
  EXPECT_EQ(io.output(), "");
  EXPECT_EQ(result.totals.held_by_key, "all");
  EXPECT_EQ(store.keys.at("host").booked, 0);
  EXPECT_EQ(store.keys.at("all").bucket.state().next_free, all_free);
}

// The input ends before the chunk booked ahead is used: it goes back to both keys.
TEST_F(MultiKeyPipe, TheEndGivesBackToEveryKey) {
  io.arrive(0s, std::string(30, 'x'));
  io.arrive(100ms, "");
  const Result result = run(bytes_per_second(1000, 20), 1000);
  EXPECT_EQ(result.ending, Ending::end_of_input);
  for (const char* key : {"host", "all"}) {
    SCOPED_TRACE(key);
    const KeysStore::Kept& kept = store.keys.at(key);
    EXPECT_GT(kept.given_back, 0);
    EXPECT_EQ(kept.booked - kept.given_back, 30);
  }
}

// "all" backs off for 2 s: the pipe writes nothing until the pause is over, and says that it
// waited for "all".
TEST_F(MultiKeyPipe, APauseOnAnyKeyHoldsThePipe) {
  store.book_elsewhere("all", 1000, 1);
  store.throttle("all", 2s);
  const std::string data(100, 'x');
  const Result result = run_all_of(data, 50, 1000);
  ASSERT_FALSE(io.writes().empty());
  EXPECT_GE(io.writes().front().time, 2s);
  ASSERT_FALSE(pauses.empty());
  EXPECT_EQ(pauses.front().first, "all");
}

// "all" follows its own timetable: at its second entry the pipe moves the key on to 10000/s, and
// 2000 bytes take about a second, not the 19 s of the first entry's 100/s.
TEST_F(MultiKeyPipe, EachKeyFollowsItsOwnTimetable) {
  all_schedule = {.timetable = "00:00,100 00:01,10000", .entry_until = 1000};
  TwoEntries all_timetable(io.start() + 1s);
  EngineOptions options = bytes_per_second(10000, 100);
  options.key_schedules = {&all_timetable};
  io.arrive(0s, std::string(2000, 'x'));
  io.arrive(0s, "");
  run(options, 100);
  EXPECT_EQ(io.output(), std::string(2000, 'x'));
  EXPECT_EQ(store.keys.at("all").bucket.params().permits_per_second, 10000);
  EXPECT_EQ(store.keys.at("all").schedule.entry_until, 2000);
  EXPECT_LT(io.writes().back().time, 3s);
}

// Another user gave "all" a timetable: the pipe is told, to follow it as that key's.
TEST_F(MultiKeyPipe, AnotherUsersTimetableOnALaterKeyIsTold) {
  BucketParams params;
  params.permits_per_second = 1000;
  store.keys.emplace("all",
                     KeysStore::Kept{.bucket = TokenBucket(params, io.now()),
                                     .schedule = {.timetable = "00:00,1000", .entry_until = 1},
                                     .quotas = {}});
  run_all_of(std::string(100, 'x'), 50, 1000);
  EXPECT_EQ(key_timetables,
            (std::vector<std::pair<std::string, std::string>>{{"all", "00:00,1000"}}));
}

// "host" at 100000/s, "all" at 1000/s: the default chunk is one write interval (108 ms) of the
// slower key's rate, 108 bytes, not 10800 at once.
TEST_F(MultiKeyPipe, AChunkIsSizedByTheSlowestKey) {
  io.arrive(0s, std::string(1000, 'x'));
  io.arrive(0s, "");
  EngineOptions options = bytes_per_second(100000, 1);
  options.default_chunk_limit = 1 << 20;
  run(options, 1000);
  EXPECT_EQ(io.output(), std::string(1000, 'x'));
  ASSERT_GT(io.writes().size(), 1U);
  for (const FakePipeIo::Write& write : io.writes()) EXPECT_LE(write.data.size(), 108U);
}

}  // namespace
}  // namespace ratelimit::pipe
