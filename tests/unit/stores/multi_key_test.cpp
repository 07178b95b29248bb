#include "stores/multi_key.hpp"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "errors.hpp"
#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "stores/state_file/state_file_format.hpp"
#include "stores/state_file/state_file_store.hpp"
#include "temp_dir.hpp"

namespace ratelimit::stores {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

PermitRequest request_for(const std::string& key, double rate) {
  PermitRequest request;
  request.key = key;
  request.params.permits_per_second = rate;
  return request;
}

// Keys kept in memory and decided together as every store decides them (decide_all()).
struct MemoryKeys {
  struct Key {
    TokenBucket bucket;
    KeySchedule schedule;
    std::vector<Quota> quotas;
    BackoffState backoff{};
  };
  std::vector<Key> keys;

  explicit MemoryKeys(const std::vector<PermitRequest>& requests, nanoseconds now) {
    for (const PermitRequest& request : requests)
      keys.push_back({.bucket = TokenBucket(request.params, now),
                      .schedule = {},
                      .quotas = {},
                      .backoff = {}});
  }
  KeysReservation decide(const std::vector<PermitRequest>& requests, nanoseconds now) {
    std::vector<KeyInCall> in_call;
    for (std::size_t i = 0; i < requests.size(); ++i)
      in_call.push_back(key_in_call(keys[i], requests[i]));
    return decide_all(in_call, now);
  }
};

// Per site 2/s, in all 10/s: each call waits for the later of the two keys' moments, and both
// keys book it then, as a request made then: all, idle until then, stores what it did not use.
TEST(MultiKeyDecision, TheLatestMomentWinsAndIsBookedOnEveryKey) {
  const std::vector<PermitRequest> call{request_for("site:a", 2), request_for("all", 10)};
  MemoryKeys store(call, 0s);
  KeysReservation first = store.decide(call, 0s);
  EXPECT_TRUE(first.call.granted);
  EXPECT_EQ(first.call.wait, 0s);
  EXPECT_FALSE(first.held_by);
  // The site's turn (500 ms) is later than all's (100 ms).
  KeysReservation second = store.decide(call, 0s);
  EXPECT_TRUE(second.call.granted);
  EXPECT_EQ(second.call.wait, 500ms);
  ASSERT_TRUE(second.held_by);
  EXPECT_EQ(*second.held_by, 0u);
  EXPECT_EQ(second.keys[0].wait, 500ms);
  EXPECT_EQ(second.keys[1].wait, 100ms);
  // all booked at 500 ms, not at its own 100 ms: its next free is 500 ms, with the 4 permits of
  // 100 to 500 ms stored and one of them spent.
  EXPECT_EQ(store.keys[1].bucket.state().next_free, 500ms);
  EXPECT_DOUBLE_EQ(store.keys[1].bucket.state().stored_permits, 3.0);
  EXPECT_EQ(store.keys[0].bucket.state().next_free, 1000ms);
  EXPECT_EQ(second.keys[1].booked, (BookingSpan{.from = 100'000'000, .until = 500'000'000}));
}

// A key that backs off holds the whole call until its pause ends, and is booked at its rate in
// force while it keeps its configured rate; the other key is booked at that moment.
TEST(MultiKeyDecision, APausedKeyHoldsTheCallAtItsRateInForce) {
  const std::vector<PermitRequest> call{request_for("site:a", 2), request_for("all", 10)};
  MemoryKeys store(call, 0s);
  store.keys[1].backoff = {.paused_until = 2s,
                           .event_at = 0s,
                           .rate_before_cut = 10.0,
                           .throttles = 1,
                           .last_throttle = 0s};
  const KeysReservation paused = store.decide(call, 0s);
  EXPECT_TRUE(paused.call.granted);
  EXPECT_EQ(paused.call.wait, 2s);
  EXPECT_EQ(paused.call.paused_for, 2s);
  EXPECT_TRUE(paused.call.backing_off);
  ASSERT_TRUE(paused.held_by);
  EXPECT_EQ(*paused.held_by, 1u);
  EXPECT_EQ(store.keys[1].bucket.params().permits_per_second, 10.0);
  // Booked at 2 s at a rate in force below 10/s: its next turn is more than 100 ms later.
  EXPECT_GT(store.keys[1].bucket.state().next_free, 2100ms);
  // site:a, idle until 2 s, spends a stored permit then.
  EXPECT_EQ(store.keys[0].bucket.state().next_free, 2s);
}

// A user's --try refused by its own 1/s key takes nothing from the global key: the other users
// still get all of it.
TEST(MultiKeyDecision, ARefusalTakesNothingFromAnyKey) {
  PermitRequest user = request_for("user:1", 1);
  PermitRequest global = request_for("all", 10);
  user.deadline = global.deadline = 0s;  // --try at 0
  const std::vector<PermitRequest> call{user, global};
  MemoryKeys store(call, 0s);
  ASSERT_TRUE(store.decide(call, 0s).call.granted);
  const BucketState user_before = store.keys[0].bucket.state();
  const BucketState global_before = store.keys[1].bucket.state();
  for (nanoseconds t = 100ms; t < 1s; t += 100ms) {
    PermitRequest again_user = user;
    PermitRequest again_global = global;
    again_user.deadline = again_global.deadline = t;
    const KeysReservation refused = store.decide({again_user, again_global}, t);
    EXPECT_FALSE(refused.call.granted) << t.count();
    ASSERT_TRUE(refused.held_by);
    EXPECT_EQ(*refused.held_by, 0u);
    EXPECT_EQ(store.keys[0].bucket.state(), user_before);
    EXPECT_EQ(store.keys[1].bucket.state(), global_before);
  }
}

// A quota that holds one key refuses the call with --timeout, and the other key keeps its turn.
TEST(MultiKeyDecision, AQuotaRefusalTakesNothingFromTheOtherKey) {
  PermitRequest limited = request_for("api", 100);
  limited.quotas = {{.limit = 1, .period = 1h}};
  PermitRequest global = request_for("all", 100);
  std::vector<PermitRequest> call{limited, global};
  MemoryKeys store(call, 0s);
  ASSERT_TRUE(store.decide(call, 0s).call.granted);
  for (PermitRequest& request : call) request.deadline = 1s + 1s;  // --timeout 1s at 1 s
  const BucketState global_before = store.keys[1].bucket.state();
  const KeysReservation refused = store.decide(call, 1s);
  EXPECT_FALSE(refused.call.granted);
  EXPECT_TRUE(refused.call.held_by_quota);
  EXPECT_GT(refused.call.wait, 59min);
  EXPECT_EQ(store.keys[1].bucket.state(), global_before);
}

// A quota that holds the call books the other key's turn at the quota's moment too.
TEST(MultiKeyDecision, AQuotaMomentIsBookedOnTheOtherKey) {
  PermitRequest limited = request_for("api", 1000);
  limited.quotas = {{.limit = 1, .period = 640ms}};
  const std::vector<PermitRequest> call{request_for("all", 1000), limited};
  MemoryKeys store(call, 0s);
  ASSERT_TRUE(store.decide(call, 0s).call.granted);
  const KeysReservation held = store.decide(call, 0s);
  ASSERT_TRUE(held.call.granted);
  ASSERT_TRUE(held.held_by);
  EXPECT_EQ(*held.held_by, 1u);
  EXPECT_TRUE(held.call.held_by_quota);
  EXPECT_GE(held.call.wait, 640ms);
  EXPECT_EQ(store.keys[0].bucket.state().next_free, held.call.wait);
}

// pay_first: the key's turn moves with the call instead, nothing stored meanwhile (its permits
// need not fit in its burst).
TEST(MultiKeyDecision, APayFirstKeyHasItsTurnMoved) {
  PermitRequest paying = request_for("paying", 10);
  paying.params.pay_first = true;
  paying.params.max_burst_seconds = 0;
  const std::vector<PermitRequest> call{paying, request_for("slow", 1)};
  MemoryKeys store(call, 0s);
  ASSERT_EQ(store.decide(call, 0s).call.wait, 100ms);  // pay_first: its own permit first
  const KeysReservation held = store.decide(call, 0s);
  EXPECT_EQ(held.call.wait, 1s);
  // Its own turn was 100 to 200 ms: moved by 800 ms to end at the call's moment.
  EXPECT_EQ(store.keys[0].bucket.state().next_free, 1s);
}

TEST(MultiKeyDecision, ChecksTheKeysOfACall) {
  EXPECT_THROW(check_keys_of_call({}), UsageError);
  EXPECT_THROW(check_keys_of_call({request_for("a", 1), request_for("a", 2)}), UsageError);
  std::vector<PermitRequest> many;
  for (std::size_t i = 0; i <= kMaxKeysPerCall; ++i)
    many.push_back(request_for(fmt::format("k{}", i), 1));
  EXPECT_THROW(check_keys_of_call(many), UsageError);
  many.pop_back();
  EXPECT_NO_THROW(check_keys_of_call(many));
  PermitRequest later = request_for("b", 1);
  later.deadline = 1s;
  EXPECT_THROW(check_keys_of_call({request_for("a", 1), later}), UsageError);
}

class MultiKeyStateFileTest : public ::testing::Test {
 protected:
  state_file::Store process() {
    return state_file::Store(state::StateDirectory::open(dir_.string()), clock_,
                             state_file::HostId{.machine_id = "m", .boot_id = "b"},
                             [](const std::string&) {});
  }
  testing::TempDir dir_;
  testing::FakeClock clock_;
  testing::FakeWaiter waiter_{clock_};
};

// Two processes name the same keys in differing orders: one decision over both, whatever the
// order, and a single-key user of one of them queues behind the multi-key bookings.
TEST_F(MultiKeyStateFileTest, KeysInAnyOrderShareTheirBuckets) {
  auto first = process();
  auto second = process();
  const PermitRequest site = request_for("site:a", 2);
  const PermitRequest all = request_for("all", 10);
  EXPECT_EQ(first.reserve_all({site, all}, waiter_).call.wait, 0ms);
  const KeysReservation reversed = second.reserve_all({all, site}, waiter_);
  EXPECT_TRUE(reversed.call.granted);
  EXPECT_EQ(reversed.call.wait, 500ms);
  ASSERT_TRUE(reversed.held_by);
  EXPECT_EQ(*reversed.held_by, 1u);
  // all was booked at 500 ms, having stored its permits until then: a user of all alone goes
  // then too.
  EXPECT_EQ(first.reserve(all, waiter_).wait, 500ms);
  EXPECT_EQ(second.reserve(site, waiter_).wait, 1000ms);
}

TEST_F(MultiKeyStateFileTest, ARefusalLeavesEveryKeyAsItWas) {
  auto store = process();
  PermitRequest user = request_for("user:1", 1);
  PermitRequest global = request_for("all", 10);
  ASSERT_TRUE(store.reserve_all({user, global}, waiter_).call.granted);
  user.deadline = global.deadline = clock_.now();  // --try
  const auto global_before = store.status("all");
  const KeysReservation refused = store.reserve_all({user, global}, waiter_);
  EXPECT_FALSE(refused.call.granted);
  EXPECT_EQ(refused.call.wait, 1s);
  const auto global_after = store.status("all");
  ASSERT_EQ(global_after.size(), 1u);
  EXPECT_EQ(global_after.front().next_free_in, global_before.front().next_free_in);
  EXPECT_EQ(global_after.front().stored_permits, global_before.front().stored_permits);
  // Another user is granted at once: all's 100 ms turn is the wait, not a refused user's.
  PermitRequest other = request_for("user:2", 1);
  other.deadline = clock_.now() + 100ms;
  global.deadline = other.deadline;
  const KeysReservation granted = store.reserve_all({other, global}, waiter_);
  EXPECT_TRUE(granted.call.granted);
  EXPECT_EQ(granted.call.wait, 100ms);
}

// While it waits for a lock, looks whether another key's file is locked.
class ProbingWaiter final : public io::Waiter {
 public:
  ProbingWaiter(testing::FakeClock& clock, std::function<void()> probe)
      : clock_(clock), probe_(std::move(probe)) {}
  nanoseconds now() override { return clock_.now(); }
  int wait_until(nanoseconds deadline, std::span<pollfd>) override {
    probe_();
    clock_.advance(std::max(deadline - clock_.now(), nanoseconds::zero()));
    return 0;
  }

 private:
  testing::FakeClock& clock_;
  std::function<void()> probe_;
};

// Every caller locks the keys' files in the order of their names, whatever the order it names
// them in: a caller waiting for "a" holds no other key's lock, so two callers that name the same
// keys in other orders never each hold what the other waits for.
TEST_F(MultiKeyStateFileTest, LocksTheKeysInTheOrderOfTheirNames) {
  const state::StateDirectory directory = state::StateDirectory::open(dir_.string());
  const state::LockedFile held_a =
      directory.lock(state_file::bucket_file_name("a"), state::LockKind::exclusive);
  int waits = 0;
  bool b_was_locked = false;
  ProbingWaiter waiter(clock_, [&] {
    ++waits;
    b_was_locked = b_was_locked || !directory.try_lock(state_file::bucket_file_name("b"));
  });
  auto store = process();
  PermitRequest b = request_for("b", 1);
  PermitRequest a = request_for("a", 1);
  b.deadline = a.deadline = clock_.now() + 5ms;
  const KeysReservation refused = store.reserve_all({b, a}, waiter);
  EXPECT_FALSE(refused.call.granted);
  EXPECT_GT(waits, 0);
  EXPECT_FALSE(b_was_locked);
}

}  // namespace
}  // namespace ratelimit::stores
