#include "stores/state_file/state_file_store.hpp"

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "stores/state_file/state_file_format.hpp"
#include "temp_dir.hpp"

namespace ratelimit::stores::state_file {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using testing::FakeWaiter;
using testing::TempDir;

constexpr const char* kBoot = "11111111-2222-3333-4444-555555555555";
constexpr const char* kMachine = "0123456789abcdef0123456789abcdef";

BucketParams bursty(double rate) {
  BucketParams params;
  params.permits_per_second = rate;
  return params;
}

class StateFileStoreTest : public ::testing::Test {
 protected:
  // Another process on the same state directory: its own descriptors, the same clock.
  Store process(std::string boot_id = kBoot, std::string machine_id = kMachine) {
    return Store(state::StateDirectory::open(dir_.string()), clock_,
                 HostId{.machine_id = std::move(machine_id), .boot_id = std::move(boot_id)},
                 [this](const std::string& note) { notes_.push_back(note); });
  }
  void write_file(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_.path() / name, std::ios::binary) << bytes;
  }
  std::string read_file(const std::string& name) {
    std::ifstream in(dir_.path() / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  // A request made now, due within `timeout`.
  PermitRequest request(BucketParams params,
                        std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max()) {
    PermitRequest permits;
    permits.key = "api";
    permits.params = params;
    if (timeout != std::chrono::nanoseconds::max()) permits.deadline = clock_.now() + timeout;
    return permits;
  }

  TempDir dir_;
  FakeClock clock_;
  FakeWaiter waiter_{clock_};
  std::vector<std::string> notes_;
};

TEST_F(StateFileStoreTest, ProcessesShareOneBucketInArrivalOrder) {
  auto first = process();
  auto second = process();
  EXPECT_EQ(first.reserve(request(bursty(10)), waiter_).wait, 0ms);
  EXPECT_EQ(second.reserve(request(bursty(10)), waiter_).wait, 100ms);
  EXPECT_EQ(first.reserve(request(bursty(10)), waiter_).wait, 200ms);
  clock_.advance(50ms);
  EXPECT_EQ(second.reserve(request(bursty(10)), waiter_).wait, 250ms);
  EXPECT_TRUE(notes_.empty());
}

// A clock on which the work after its next reading takes `busy_after_next_reading`: the store's
// save of the record it decided on, that a busy disk holds.
class BusyClock final : public Clock {
 public:
  std::chrono::nanoseconds now() override {
    const auto reading = now_;
    now_ += std::exchange(busy_after_next_reading, 0ns);
    return reading;
  }
  void sleep_for(std::chrono::nanoseconds d) override { now_ += std::max(d, 0ns); }
  std::chrono::nanoseconds peek() const { return now_; }

  std::chrono::nanoseconds busy_after_next_reading{0};

 private:
  std::chrono::nanoseconds now_{1s};
};

TEST_F(StateFileStoreTest, TheWaitCountsFromTheAnswerSoASlowSaveDoesNotDelayTheTurn) {
  BusyClock clock;
  const auto on_busy_clock = [&] {
    return Store(state::StateDirectory::open(dir_.string()), clock,
                 HostId{.machine_id = kMachine, .boot_id = kBoot}, [](const std::string&) {});
  };
  auto first = on_busy_clock();
  auto second = on_busy_clock();
  const auto booked_at = clock.peek();
  EXPECT_EQ(first.reserve(request(bursty(10)), waiter_).wait, 0ms);
  // The next permit's turn is 100 ms after the first: however long the second call takes, its
  // caller counts the wait from the answer and gets that turn.
  clock.busy_after_next_reading = 30ms;
  const Reservation reservation = second.reserve(request(bursty(10)), waiter_);
  EXPECT_EQ(clock.peek() + reservation.wait, booked_at + 100ms);
}

TEST_F(StateFileStoreTest, AThrottleHoldsEveryProcessOfTheKeyUntilThePauseEnds) {
  auto first = process();
  auto second = process();
  EXPECT_FALSE(first.throttle({.key = "api", .sent_before = 0s, .retry_after = 3s}));
  EXPECT_EQ(first.reserve(request(bursty(10)), waiter_).wait, 0ms);
  const std::optional<ThrottleResult> throttled =
      second.throttle({.key = "api", .sent_before = 0s, .retry_after = 3s});
  ASSERT_TRUE(throttled);
  EXPECT_TRUE(throttled->outcome.new_event);
  EXPECT_EQ(throttled->paused_for, 3s);
  EXPECT_DOUBLE_EQ(throttled->rate_in_force, 5.0);
  const Reservation held = first.reserve(request(bursty(10)), waiter_);
  EXPECT_EQ(held.wait, 3s);
  EXPECT_EQ(held.paused_for, 3s);
  // At the rate in force (5/s), not the configured 10/s.
  EXPECT_EQ(second.reserve(request(bursty(10)), waiter_).wait,
            3s + std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / 5.0)));
  EXPECT_FALSE(first.reserve(request(bursty(10), 1s), waiter_).granted);
  const std::vector<BucketStatus> status = first.status("api");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].params.permits_per_second, 10.0);
  EXPECT_EQ(status[0].paused_for, 3s);
  EXPECT_EQ(status[0].throttles, 1);
}

TEST_F(StateFileStoreTest, AKeyNeverThrottledKeepsItsRecordBytes) {
  auto store = process();
  store.reserve(request(bursty(10)), waiter_);
  const DecodedRecord decoded = decode_record(read_file(bucket_file_name("api")), clock_.now());
  ASSERT_TRUE(decoded.record);
  EXPECT_EQ(decoded.record->backoff, BackoffState{});
  EXPECT_EQ(read_file(bucket_file_name("api")), encode_record(*decoded.record));
  EXPECT_EQ(store.status("api").at(0).throttles, 0);
}

// Two pipes' turns: A's chunk booked ahead, then B's. A ends: giving back its chunk ahead would
// let the next booking move up between A's turn and B's, so it stays booked; B's, the last, goes.
TEST_F(StateFileStoreTest, GivesBackOnlyWhatNoLaterBookingBuiltOn) {
  auto pipe_a = process();
  auto pipe_b = process();
  PermitRequest chunk = request(bursty(100));
  chunk.permits = 10;  // 100 ms
  ASSERT_EQ(pipe_a.reserve(chunk, waiter_).wait, 0ms);
  const Reservation a_ahead = pipe_a.reserve(chunk, waiter_);
  const Reservation b_chunk = pipe_b.reserve(chunk, waiter_);
  const Reservation b_ahead = pipe_b.reserve(chunk, waiter_);
  ASSERT_EQ(b_ahead.wait, 300ms);
  EXPECT_EQ(b_chunk.booked.from, a_ahead.booked.until);
  clock_.advance(50ms);
  EXPECT_FALSE(pipe_a.give_back({.key = "api", .permits = 10, .booked = a_ahead.booked}));
  PermitRequest probe = request(bursty(100));
  probe.permits = 1;
  const Reservation after_a = pipe_b.reserve(probe, waiter_);
  EXPECT_EQ(after_a.wait, 350ms);  // 400 ms from the start: nothing moved up
  // B's two chunks and the probe, one after the other, are the last: they go back, as far as
  // where B's first chunk found the key (200 ms from the start).
  EXPECT_TRUE(pipe_b.give_back(
      {.key = "api",
       .permits = 21,
       .booked = BookingSpan{.from = b_chunk.booked.from, .until = after_a.booked.until}}));
  EXPECT_EQ(pipe_a.reserve(probe, waiter_).wait, 150ms);
  // Without a span (a rate set by hand), back in any case.
  EXPECT_TRUE(pipe_a.give_back({.key = "api", .permits = 1, .booked = std::nullopt}));
  EXPECT_EQ(pipe_a.reserve(probe, waiter_).wait, 150ms);
}

// One permit at 0.001/s books the next 1000 s ahead; the rate meant, set by hand, converts what is
// owed (1 permit) to the new rate, even from the 292-year limit; a lowered rate keeps the turn.
TEST_F(StateFileStoreTest, ARaisedRateSetByHandConvertsTheBookedTurn) {
  auto store = process();
  PermitRequest keeping = request(bursty(5));
  keeping.apply_params = false;
  for (const double typo : {0.001, 1e-300}) {
    store.reset("api");
    EXPECT_EQ(store.reserve(request(bursty(typo)), waiter_).wait, 0ms);
    ASSERT_TRUE(
        set_key_rate_by_hand(store, {.key = "api", .permits_per_second = 5, .schedule = {}}));
    // 200 ms for what is owed, give or take a permit of rounding.
    EXPECT_LT(store.reserve(keeping, waiter_).wait, 500ms) << typo;
  }
  // Booked 200 ms ahead at 5/s; lowered to 1/s, still 200 ms (not the 1 s a permit takes now).
  store.reset("api");
  EXPECT_EQ(store.reserve(request(bursty(5)), waiter_).wait, 0ms);
  ASSERT_TRUE(set_key_rate_by_hand(store, {.key = "api", .permits_per_second = 1, .schedule = {}}));
  keeping.params = bursty(1);
  EXPECT_EQ(store.reserve(keeping, waiter_).wait, 200ms);
  EXPECT_FALSE(
      set_key_rate_by_hand(store, {.key = "none", .permits_per_second = 5, .schedule = {}}));
}

TEST(SetRateByHand, ConvertsOnlyARaisedRate) {
  TokenBucket bucket(bursty(1), 0s);
  bucket.reserve(10, 0s);  // the next turn at 10 s
  set_rate_by_hand(bucket, 10, 1s);
  EXPECT_EQ(bucket.state().next_free, 1s + 900ms);  // 9 permits owed at 10/s
  set_rate_by_hand(bucket, 1, 1s);
  EXPECT_EQ(bucket.state().next_free, 1s + 900ms);  // as Guava's setRate
}

TEST_F(StateFileStoreTest, MatchesTheCoreDecisionForDecision) {
  auto store = process();
  BucketParams params;
  params.shape = BucketShape::warming_up;
  params.permits_per_second = 4;
  params.warmup = 2s;
  TokenBucket reference(params, clock_.now());
  for (int i = 0; i < 20; ++i) {
    clock_.advance(std::chrono::milliseconds(37 * (i % 5)));
    PermitRequest permits = request(params);
    permits.permits = 1 + i % 3;
    EXPECT_EQ(store.reserve(permits, waiter_).wait,
              reference.reserve(permits.permits, clock_.now()));
  }
}

TEST_F(StateFileStoreTest, TryRefusesWithoutBooking) {
  auto store = process();
  ASSERT_TRUE(store.reserve(request(bursty(10), 0ns), waiter_).granted);
  const Reservation refused = store.reserve(request(bursty(10), 0ns), waiter_);
  EXPECT_FALSE(refused.granted);
  EXPECT_EQ(refused.wait, 100ms);
  clock_.advance(100ms);
  EXPECT_TRUE(store.reserve(request(bursty(10), 0ns), waiter_).granted);
}

TEST_F(StateFileStoreTest, TimeoutGrantsWhatIsDueInTime) {
  auto store = process();
  store.reserve(request(bursty(10)), waiter_);
  EXPECT_FALSE(store.reserve(request(bursty(10), 99ms), waiter_).granted);
  const Reservation granted = store.reserve(request(bursty(10), 100ms), waiter_);
  EXPECT_TRUE(granted.granted);
  EXPECT_EQ(granted.wait, 100ms);
}

TEST_F(StateFileStoreTest, NewParametersApplyFromNowOn) {
  auto store = process();
  store.reserve(request(bursty(1)), waiter_);
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 1s);
  // The booking at 1 permit/s is kept; after it, permits come at the new rate.
  EXPECT_EQ(store.reserve(request(bursty(10)), waiter_).wait, 2s);
  EXPECT_EQ(store.reserve(request(bursty(10)), waiter_).wait, 2100ms);
  EXPECT_EQ(store.status("api").front().params, bursty(10));
}

// The notation goes with the parameters that a request applies: to a new key, in place of the
// key's (blank if the request has none); a request that finds them the key's, or keeps the key's,
// leaves the key's notation.
TEST_F(StateFileStoreTest, TheKeyKeepsTheNotationOfTheParametersApplied) {
  auto store = process();
  const auto notation_now = [&] { return store.status("api").at(0).notation; };
  PermitRequest made = request(bursty(10));
  made.notation = "bytes si 1 time";
  store.reserve(made, waiter_);
  EXPECT_EQ(notation_now(), "bytes si 1 time");
  PermitRequest same = made;
  same.notation = "permits si 0 time";
  store.reserve(same, waiter_);
  EXPECT_EQ(notation_now(), "bytes si 1 time");
  PermitRequest kept = request(bursty(20));
  kept.apply_params = false;
  kept.notation = "lines si 0 time";
  store.reserve(kept, waiter_);
  EXPECT_EQ(notation_now(), "bytes si 1 time");
  PermitRequest replacing = request(bursty(20));
  replacing.notation = "lines si 60 units";
  store.reserve(replacing, waiter_);
  EXPECT_EQ(notation_now(), "lines si 60 units");
  store.reserve(request(bursty(30)), waiter_);
  EXPECT_EQ(notation_now(), "");
  // Kept by a change of rate by hand and a give-back.
  store.reserve(replacing, waiter_);
  store.set_rate({.key = "api", .permits_per_second = 40, .schedule = {}});
  store.give_back({.key = "api", .permits = 1, .booked = std::nullopt});
  EXPECT_EQ(notation_now(), "lines si 60 units");
}

TEST_F(StateFileStoreTest, IdleBucketStoresABurst) {
  auto store = process();
  store.reserve(request(bursty(10)), waiter_);
  clock_.advance(5s);
  const auto status = store.status("api");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_DOUBLE_EQ(status.front().stored_permits, 10.0);
  EXPECT_EQ(status.front().next_free_in, 0ns);
  for (int i = 0; i < 11; ++i)
    EXPECT_EQ(store.reserve(request(bursty(10)), waiter_).wait, 0ns) << i;
  EXPECT_EQ(store.reserve(request(bursty(10)), waiter_).wait, 100ms);
}

TEST_F(StateFileStoreTest, CorruptRecordIsAFreshBucket) {
  auto store = process();
  store.reserve(request(bursty(1)), waiter_);
  std::string bytes = read_file("api.bucket");
  bytes[20] = static_cast<char>(bytes[20] ^ 0x40);
  write_file("api.bucket", bytes);
  EXPECT_NE(store.status(std::nullopt).front().problem, "");
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 0ns);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_EQ(notes_.front(), "key 'api': bad checksum; starting a fresh bucket");
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 1s);
}

// Any record the store writes, it reads whole: every number of quotas up to the most a record
// keeps, timetables and notations up to their longest.
TEST_F(StateFileStoreTest, EveryRecordItWritesItReads) {
  auto store = process();
  for (const std::size_t quota_count : {0, 1, 8, 9, 64})
    for (const std::size_t timetable_bytes : {std::size_t{0}, std::size_t{1}, kMaxTimetableBytes})
      for (const std::size_t notation_bytes : {0, 64}) {
        PermitRequest largest = request(bursty(1e6));
        for (std::size_t i = 0; i < quota_count; ++i)
          largest.quotas.push_back(
              {.limit = std::int64_t{1} << 52, .period = std::chrono::hours(1 + i)});
        largest.schedule = {.timetable = std::string(timetable_bytes, ';'), .entry_until = 1};
        largest.notation = std::string(notation_bytes, 'n');
        store.reset("api");
        ASSERT_TRUE(store.reserve(largest, waiter_).granted);
        largest.permits = 3;
        ASSERT_TRUE(store.reserve(largest, waiter_).granted);
        const std::vector<BucketStatus> status = store.status("api");
        const std::string where = fmt::format("{} quotas, timetable of {} bytes, notation of {}",
                                              quota_count, timetable_bytes, notation_bytes);
        ASSERT_EQ(status.size(), 1u) << where;
        EXPECT_EQ(status[0].problem, "") << where;
        ASSERT_EQ(status[0].quotas.size(), quota_count) << where;
        for (const QuotaStatus& quota : status[0].quotas) EXPECT_EQ(quota.used, 4) << where;
        EXPECT_EQ(status[0].schedule, largest.schedule) << where;
        EXPECT_EQ(status[0].notation, largest.notation) << where;
      }
  // The largest record is that of a throttled key (version 8).
  ASSERT_TRUE(store.throttle({.key = "api", .sent_before = 0s, .retry_after = 0s}));
  EXPECT_EQ(read_file("api.bucket").size(), kMaxRecordBytes);
  EXPECT_EQ(store.status("api").at(0).problem, "");
  EXPECT_TRUE(notes_.empty()) << notes_.front();
}

TEST_F(StateFileStoreTest, TruncatedAndGarbageRecordsAreFreshBuckets) {
  auto store = process();
  store.reserve(request(bursty(1)), waiter_);
  write_file("api.bucket", read_file("api.bucket").substr(0, 50));
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 0ns);
  write_file("api.bucket", std::string(5000, 'x'));
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 0ns);
  // Longer than any record: the rest is not read.
  write_file("api.bucket", read_file("api.bucket") + std::string(kMaxRecordBytes, '\0'));
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 0ns);
  ASSERT_EQ(notes_.size(), 3u);
  EXPECT_EQ(notes_.back(),
            fmt::format("key 'api': record of {} bytes, expected {}; starting a fresh bucket",
                        kMaxRecordBytes + 1, read_file("api.bucket").size()));
}

TEST_F(StateFileStoreTest, ARecordBeyondItsParametersIsAFreshBucket) {
  auto store = process();
  store.reserve(request(bursty(1)), waiter_);
  StateRecord record;
  record.params = bursty(1);
  record.state = {.stored_permits = 1e300, .next_free = clock_.now()};
  record.machine_id = kMachine;
  record.boot_id = kBoot;
  write_file("api.bucket", encode_record(record));
  EXPECT_NE(store.status(std::nullopt).front().problem, "");
  // 1e300 stored permits would let everything through; a fresh bucket lets one.
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 0ns);
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 1s);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_EQ(notes_.front(),
            "key 'api': stored permits 1e+300 above the bucket's 1; starting a fresh bucket");
}

TEST_F(StateFileStoreTest, RecordOfAPreviousBootIsAFreshBucket) {
  process("00000000-0000-0000-0000-000000000000").reserve(request(bursty(1)), waiter_);
  auto store = process();
  EXPECT_EQ(store.reserve(request(bursty(1)), waiter_).wait, 0ns);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_EQ(notes_.front(), "key 'api': state from a previous boot; starting a fresh bucket");
}

TEST_F(StateFileStoreTest, RecordOfAnotherMachineIsRefused) {
  process(kBoot, "ffffffffffffffffffffffffffffffff").reserve(request(bursty(1)), waiter_);
  auto store = process();
  try {
    store.reserve(request(bursty(1)), waiter_);
    ADD_FAILURE() << "another machine's record was used";
  } catch (const UnsafeStateError& error) {
    EXPECT_EQ(std::string(error.what()),
              "state file '" + dir_.string() +
                  "/api.bucket' was written on another machine (machine id "
                  "ffffffffffffffffffffffffffffffff, this is 0123456789abcdef0123456789abcdef): a "
                  "state directory shared by hosts cannot keep one limit; use a directory of this "
                  "host's (--state-dir)");
  }
  // The other machine's record is left as it was, and reset clears it.
  EXPECT_EQ(
      process(kBoot, "ffffffffffffffffffffffffffffffff").reserve(request(bursty(1)), waiter_).wait,
      1s);
  EXPECT_TRUE(store.reset("api"));
  EXPECT_TRUE(store.reserve(request(bursty(1)), waiter_).granted);
}

TEST_F(StateFileStoreTest, MachineWithoutAnIdTakesEveryRecordAsItsOwn) {
  process(kBoot, "ffffffffffffffffffffffffffffffff").reserve(request(bursty(1)), waiter_);
  EXPECT_EQ(process(kBoot, "").reserve(request(bursty(1)), waiter_).wait, 1s);
}

TEST_F(StateFileStoreTest, StatusListsBucketsByKeyAndResetForgetsOne) {
  auto store = process();
  for (const char* key : {"b", "a/x", "c"}) {
    PermitRequest permits = request(bursty(2), 0ns);
    permits.key = key;
    store.reserve(permits, waiter_);
  }
  write_file("unrelated.txt", "");
  std::vector<std::string> keys;
  for (const auto& bucket : store.status(std::nullopt)) keys.push_back(bucket.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"a/x", "b", "c"}));
  const auto only_b = store.status("b");
  ASSERT_EQ(only_b.size(), 1u);
  EXPECT_EQ(only_b.front().next_free_in, 500ms);
  EXPECT_TRUE(store.reset("b"));
  EXPECT_FALSE(store.reset("b"));
  EXPECT_TRUE(store.status("b").empty());
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "a%2Fx.bucket"));
}

TEST_F(StateFileStoreTest, SymlinkAtTheStateFileIsNotFollowed) {
  TempDir elsewhere;
  const auto target = elsewhere.path() / "target";
  std::ofstream(target) << "precious";
  std::filesystem::create_symlink(target, dir_.path() / "api.bucket");
  auto store = process();
  EXPECT_THROW(store.reserve(request(bursty(1)), waiter_), UnsafeStateError);
  std::ifstream in(target);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
}

TEST_F(StateFileStoreTest, DirectoryWritableByOthersIsRefused) {
  ::chmod(dir_.string().c_str(), 0777);
  EXPECT_THROW(state::StateDirectory::open(dir_.string()), UnsafeStateError);
  ::chmod(dir_.string().c_str(), 0720);
  EXPECT_THROW(state::StateDirectory::open(dir_.string()), UnsafeStateError);
  ::chmod(dir_.string().c_str(), 0755);
  EXPECT_NO_THROW(state::StateDirectory::open(dir_.string()));
}

TEST_F(StateFileStoreTest, MissingDirectoryIsCreatedPrivate) {
  const std::string path = dir_.string() + "/state";
  state::StateDirectory::open(path);
  struct stat status {};
  ASSERT_EQ(::stat(path.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0700u);
}

TEST_F(StateFileStoreTest, StateFilesArePrivate) {
  process().reserve(request(bursty(1)), waiter_);
  struct stat status {};
  ASSERT_EQ(::stat((dir_.path() / "api.bucket").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0600u);
}

TEST_F(StateFileStoreTest, SlotLockIsExclusiveUntilClosed) {
  const state::StateDirectory directory = state::StateDirectory::open(dir_.string());
  io::FileDescriptor held = directory.try_lock("api.slot-0");
  ASSERT_TRUE(held);
  EXPECT_FALSE(directory.try_lock("api.slot-0"));
  held.reset();
  EXPECT_TRUE(directory.try_lock("api.slot-0"));
}

TEST_F(StateFileStoreTest, AnUpdateReplacesTheRecordWholeSoNoCrashCanTearIt) {
  auto store = process();
  store.reserve(request(bursty(10)), waiter_);
  const std::string before = read_file("api.bucket");
  // A reader (or a crash) in the middle of the next update sees the old file whole.
  std::ifstream old_file(dir_.path() / "api.bucket", std::ios::binary);
  struct stat old_status {};
  ASSERT_EQ(::stat((dir_.path() / "api.bucket").c_str(), &old_status), 0);
  store.reserve(request(bursty(10)), waiter_);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(old_file), {}), before);
  struct stat new_status {};
  ASSERT_EQ(::stat((dir_.path() / "api.bucket").c_str(), &new_status), 0);
  EXPECT_NE(new_status.st_ino, old_status.st_ino);
  EXPECT_NE(read_file("api.bucket"), before);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "api.bucket.new"));
}

TEST_F(StateFileStoreTest, WhatACrashBeforeTheRenameLeftIsIgnored) {
  auto store = process();
  EXPECT_EQ(store.reserve(request(bursty(10)), waiter_).wait, 0ms);
  write_file("api.bucket.new", "half a rec");
  // The booked record holds: the next permit waits its turn, no fresh bucket's free one.
  EXPECT_EQ(store.reserve(request(bursty(10)), waiter_).wait, 100ms);
  EXPECT_TRUE(notes_.empty());
  EXPECT_EQ(store.status("api").size(), 1u);
}

// Another process holding the bucket's lock (stopped inside its update, say) for as long as the
// test runs.
class HeldLockTest : public StateFileStoreTest {
 protected:
  void SetUp() override {
    process().reserve(request(bursty(1000)), waiter_);
    held_ =
        state::StateDirectory::open(dir_.string()).lock("api.bucket", state::LockKind::exclusive);
  }
  std::optional<state::LockedFile> held_;
};

TEST_F(HeldLockTest, TryDoesNotWaitForTheLock) {
  const Reservation reservation = process().reserve(request(bursty(1000), 0ns), waiter_);
  EXPECT_FALSE(reservation.granted);
  EXPECT_EQ(reservation.signal, 0);
  EXPECT_TRUE(waiter_.waits.empty());
}

TEST_F(HeldLockTest, DeadlineBoundsTheWaitForTheLock) {
  const auto start = clock_.now();
  const Reservation reservation = process().reserve(request(bursty(1000), 30ms), waiter_);
  EXPECT_FALSE(reservation.granted);
  EXPECT_EQ(clock_.now() - start, 30ms);
  // Tried again after 0.1, 0.2, 0.4 ... ms, at most 10 ms apart.
  ASSERT_GE(waiter_.waits.size(), 3u);
  EXPECT_EQ(waiter_.waits[0], 100us);
  EXPECT_EQ(waiter_.waits[1], 200us);
  for (const auto wait : waiter_.waits) EXPECT_LE(wait, 10ms);
}

TEST_F(HeldLockTest, StopSignalEndsTheWaitForTheLock) {
  waiter_.signal_during_wait = 5;
  const Reservation reservation = process().reserve(request(bursty(1000)), waiter_);
  EXPECT_FALSE(reservation.granted);
  EXPECT_EQ(reservation.signal, SIGINT);
  EXPECT_EQ(waiter_.waits.size(), 5u);
}

TEST_F(HeldLockTest, LockLetGoIsTaken) {
  auto store = process();
  held_.reset();
  clock_.advance(1s);
  EXPECT_TRUE(store.reserve(request(bursty(1000), 0ns), waiter_).granted);
}

// A key owns its settings (issue 39): a request keeps them (as every user's does), so that one
// without --quota neither removes the key's quota nor its count; it follows them and is told once.
TEST_F(StateFileStoreTest, ACallerWithoutTheQuotaKeepsTheKeysBudget) {
  Store store = process();
  PermitRequest with_quota = request(bursty(100));
  with_quota.apply_params = false;
  with_quota.quotas = {{.limit = 3, .period = 1h}};
  const Reservation first = store.reserve(with_quota, waiter_);
  EXPECT_TRUE(first.granted);
  EXPECT_FALSE(first.followed);
  PermitRequest without = request(bursty(100), 1s);
  without.apply_params = false;
  const Reservation second = store.reserve(without, waiter_);
  EXPECT_TRUE(second.granted);
  ASSERT_TRUE(second.followed);
  EXPECT_TRUE(second.tell_followed);
  EXPECT_EQ(second.followed->quotas, with_quota.quotas);
  const Reservation third = store.reserve(without, waiter_);
  EXPECT_TRUE(third.granted);
  EXPECT_FALSE(third.tell_followed);
  const Reservation fourth = store.reserve(without, waiter_);
  EXPECT_FALSE(fourth.granted);
  EXPECT_TRUE(fourth.held_by_quota);
  const std::vector<BucketStatus> status = store.status("api");
  ASSERT_EQ(status.size(), 1u);
  ASSERT_EQ(status.front().quotas.size(), 1u);
  EXPECT_EQ(status.front().quotas.front().used, 3);
}

// Two hosts' scripts with different rates: the key keeps the first's, and 30 calls tell once.
TEST_F(StateFileStoreTest, TwoCallersWithOtherRatesDoNotFlipTheKey) {
  Store store = process();
  int told = 0;
  for (int call = 0; call < 30; ++call) {
    PermitRequest permits = request(bursty(call % 2 == 0 ? 1000 : 500));
    permits.apply_params = false;
    const Reservation reservation = store.reserve(permits, waiter_);
    EXPECT_EQ(reservation.key_permits_per_second, 1000);
    told += reservation.tell_followed ? 1 : 0;
    clock_.advance(10ms);
  }
  EXPECT_EQ(told, 1);
}

// `set --key` sticks under a loop at 4/s: its next request keeps 1/s, is told once, and the turns
// are a second apart.
TEST_F(StateFileStoreTest, SetSticksUnderARunningLoop) {
  Store store = process();
  PermitRequest loop = request(bursty(4));
  loop.apply_params = false;
  EXPECT_FALSE(store.reserve(loop, waiter_).followed);
  ASSERT_TRUE(store.set_rate({.key = "api", .permits_per_second = 1}));
  clock_.advance(250ms);
  const Reservation after_set = store.reserve(loop, waiter_);
  EXPECT_TRUE(after_set.tell_followed);
  EXPECT_EQ(after_set.key_permits_per_second, 1);
  const Reservation next = store.reserve(loop, waiter_);
  EXPECT_FALSE(next.tell_followed);
  EXPECT_EQ(next.wait, 1s);
}

// `set --key` with settings changes any of them, quotas included, and makes a key that has none.
TEST_F(StateFileStoreTest, SetSettingsChangeQuotasOrMakeTheKey) {
  Store store = process();
  const KeySettings made{
      .params = bursty(3), .timetable = {}, .quotas = {{.limit = 2, .period = 1h}}};
  RateChange change;
  change.key = "api";
  change.permits_per_second = 3;
  change.settings = made;
  ASSERT_TRUE(store.set_rate(change));
  std::vector<BucketStatus> status = store.status("api");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status.front().params, made.params);
  ASSERT_EQ(status.front().quotas.size(), 1u);
  PermitRequest permits = request(bursty(100));
  permits.apply_params = false;
  EXPECT_TRUE(store.reserve(permits, waiter_).granted);
  KeySettings without_quota = made;
  without_quota.params.max_burst_seconds = 2;
  without_quota.quotas.clear();
  change.settings = without_quota;
  ASSERT_TRUE(store.set_rate(change));
  status = store.status("api");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status.front().params.max_burst_seconds, 2);
  EXPECT_TRUE(status.front().quotas.empty());
}

}  // namespace
}  // namespace ratelimit::stores::state_file
