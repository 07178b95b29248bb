// exec::admit on a fake clock: when a caller is let through, how long it waited for a slot and
// for its permits, and that a timeout or a signal ends the wait without running the command.
#include "exec/admission.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "stores/multi_key.hpp"

namespace ratelimit::exec {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

// The keys of these calls were never throttled.
const BackoffState kNeverThrottled{};

// One process's view of buckets kept in memory, deciding as every store does.
class CountingStore final : public stores::BucketStore {
 public:
  explicit CountingStore(Clock& clock) : clock_(clock) {}
  stores::Reservation reserve(const stores::PermitRequest& request, io::Waiter&) override {
    const nanoseconds now = clock_.now();
    auto [bucket, added] = buckets_.try_emplace(request.key, request.params, now);
    auto [schedule, new_schedule] = schedules_.try_emplace(request.key, request.schedule);
    auto [quotas, new_quotas] = quotas_.try_emplace(request.key);
    stores::Reservation reservation =
        stores::decide(bucket->second, schedule->second, quotas->second, request, now);
    stores::notice_followed(reservation, request, noticed_[request.key]);
    return reservation;
  }
  stores::KeysReservation reserve_all(const std::vector<stores::PermitRequest>& requests,
                                      io::Waiter&) override {
    const nanoseconds now = clock_.now();
    std::vector<stores::KeyInCall> keys;
    for (const stores::PermitRequest& request : requests) {
      auto bucket = buckets_.try_emplace(request.key, request.params, now).first;
      auto schedule = schedules_.try_emplace(request.key, request.schedule).first;
      auto quotas = quotas_.try_emplace(request.key).first;
      keys.push_back({.bucket = bucket->second,
                      .schedule = schedule->second,
                      .quotas = quotas->second,
                      .request = request,
                      .backoff = kNeverThrottled});
    }
    stores::KeysReservation decision = stores::decide_all(keys, now);
    for (std::size_t i = 0; i < requests.size(); ++i)
      stores::notice_followed(decision.keys[i], requests[i], noticed_[requests[i].key]);
    return decision;
  }
  bool set_rate(const stores::RateChange&) override { return false; }
  std::vector<stores::BucketStatus> status(const std::optional<std::string>&) override {
    return {};
  }
  bool reset(const std::string& key) override { return buckets_.erase(key) > 0; }
  bool give_back(const stores::UnusedPermits& unused) override {
    return stores::give_back(buckets_.at(unused.key), unused.permits, clock_.now(), unused.booked);
  }

 private:
  Clock& clock_;
  std::map<std::string, TokenBucket> buckets_;
  std::map<std::string, stores::KeySchedule> schedules_;
  std::map<std::string, std::vector<Quota>> quotas_;
  std::map<std::string, std::uint64_t> noticed_;
};

// The slots are busy until a given time.
class FakeSlots final : public exec::InflightSlots {
 public:
  explicit FakeSlots(testing::FakeClock& clock) : clock_(clock) {}
  io::FileDescriptor try_take(const std::string&, int) override {
    if (clock_.now() < free_at) return {};
    return io::FileDescriptor(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  nanoseconds free_at{0};

 private:
  testing::FakeClock& clock_;
};

class Admit : public ::testing::Test {
 protected:
  // A show_wait that keeps each wait shown in `shown`, and whether one is shown now in
  // `shown_during_waits` at each wait.
  ShowWait show_waits() {
    waiter.on_wait = [this] { shown_during_waits.push_back(!showing.expired()); };
    return [this](const KeysWait& wait) {
      shown.push_back(wait);
      const auto record = std::make_shared<int>(0);
      showing = record;
      return std::shared_ptr<void>(record);
    };
  }
  std::vector<KeysWait> shown;
  std::weak_ptr<void> showing;
  std::vector<bool> shown_during_waits;

  AdmissionRequest request(nanoseconds timeout = nanoseconds::max(), int max_inflight = 0) {
    AdmissionRequest request;
    request.permits.key = "api";
    request.permits.params.permits_per_second = 10.0;
    if (timeout != nanoseconds::max()) request.permits.deadline = clock.now() + timeout;
    request.max_inflight = max_inflight;
    return request;
  }
  // A call over "api" (10/s) and "all" (2/s).
  AdmissionRequest call_over_two_keys() {
    AdmissionRequest call = request();
    stores::PermitRequest all;
    all.key = "all";
    all.params.permits_per_second = 2.0;
    call.more_keys = {all};
    return call;
  }

  testing::FakeClock clock;
  CountingStore store{clock};
  testing::FakeWaiter waiter{clock};
  FakeSlots slots{clock};

  Admission admit(const AdmissionRequest& request) {
    return exec::admit(store, &slots, waiter, request);
  }
};

TEST_F(Admit, FirstCallerAtOnceTheNextAfterItsTurn) {
  EXPECT_EQ(admit(request()).result, AdmissionResult::admitted);
  EXPECT_EQ(admit(request()).result, AdmissionResult::admitted);
  EXPECT_EQ(waiter.waits, (std::vector<nanoseconds>{0ms, 100ms}));
}

// A key that backs off, on which another user reports a pause of 2 s while this caller waits for
// its turn (booked before the report).
class PausedWhileWaitingStore final : public stores::BucketStore {
 public:
  stores::Reservation reserve(const stores::PermitRequest&, io::Waiter&) override {
    ++reservations;
    stores::Reservation reservation;
    reservation.granted = true;
    reservation.wait = reservations == 1 ? 100ms : 50ms;
    reservation.backing_off = true;
    return reservation;
  }
  // Over several keys: each key answers as the first.
  stores::KeysReservation reserve_all(const std::vector<stores::PermitRequest>& requests,
                                      io::Waiter& waiter) override {
    stores::KeysReservation decision;
    decision.call = reserve(requests.front(), waiter);
    decision.keys.assign(requests.size(), decision.call);
    return decision;
  }
  nanoseconds pause_left(const std::string& key) override {
    if (key != paused_key) return nanoseconds::zero();
    return std::exchange(pause_reported, nanoseconds::zero());
  }
  bool set_rate(const stores::RateChange&) override { return false; }
  std::vector<stores::BucketStatus> status(const std::optional<std::string>&) override {
    return {};
  }
  bool reset(const std::string&) override { return false; }
  bool give_back(const stores::UnusedPermits&) override { return false; }

  int reservations = 0;
  nanoseconds pause_reported = 2s;
  std::string paused_key = "api";  // the key of the pause reported
};

TEST_F(Admit, APauseReportedWhileWaitingVoidsTheTurn) {
  PausedWhileWaitingStore paused;
  const nanoseconds start = clock.now();
  const Admission admission = exec::admit(paused, &slots, waiter, request());
  EXPECT_EQ(admission.result, AdmissionResult::admitted);
  // Its turn, then the pause, then a turn booked anew.
  EXPECT_EQ(paused.reservations, 2);
  EXPECT_EQ(clock.now() - start, 100ms + 2s + 50ms);
  EXPECT_EQ(admission.paused_for, 2s);
}

// A call of several keys is shown while it waits for a --max-inflight slot of its first key (no end
// known without a deadline) and while it waits for a pause on a key after its turn, each wait
// only as long as it lasts.
TEST_F(Admit, AWaitForASlotOrAPauseOfSeveralKeysIsShownToo) {
  AdmissionRequest call = call_over_two_keys();
  call.show_wait = show_waits();
  call.max_inflight = 1;
  slots.free_at = clock.now() + 15ms;
  EXPECT_EQ(admit(call).result, AdmissionResult::admitted);
  // Two looks at the slots (at 0 and 10 ms) with the slot's wait shown, then the turn (at once).
  EXPECT_EQ(shown_during_waits, (std::vector<bool>{true, true, false}));
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_EQ(shown.front().what, control::CallWait::slot);
  EXPECT_EQ(shown.front().keys, (std::vector<std::string>{"api", "all"}));
  EXPECT_EQ(shown.front().held_by, "api");
  EXPECT_EQ(shown.front().until, nanoseconds::max());
  EXPECT_TRUE(showing.expired());

  PausedWhileWaitingStore paused;
  paused.paused_key = "all";
  shown.clear();
  shown_during_waits.clear();
  call.max_inflight = 0;
  const nanoseconds start = clock.now();
  EXPECT_EQ(exec::admit(paused, &slots, waiter, call).result, AdmissionResult::admitted);
  // The turn (nothing held it: no key named), the pause shown, the new turn.
  EXPECT_EQ(shown_during_waits, (std::vector<bool>{false, true, false}));
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_EQ(shown.front().what, control::CallWait::pause);
  EXPECT_EQ(shown.front().held_by, "all");
  EXPECT_EQ(shown.front().until, start + 100ms + 2s);
  EXPECT_TRUE(showing.expired());
}

TEST_F(Admit, APauseBeyondTheTimeoutRefuses) {
  PausedWhileWaitingStore paused;
  EXPECT_EQ(exec::admit(paused, &slots, waiter, request(1s)).result, AdmissionResult::refused);
  EXPECT_EQ(paused.reservations, 1);
}

// Several keys: the call waits for the latest key's moment, says which key that was, and tells
// each key's followed settings apart.
TEST_F(Admit, SeveralKeysWaitForTheLatestAndSayWhichKey) {
  AdmissionRequest call = call_over_two_keys();
  EXPECT_EQ(admit(call).result, AdmissionResult::admitted);
  const Admission second = admit(call);
  EXPECT_EQ(second.result, AdmissionResult::admitted);
  EXPECT_EQ(second.held_by, "all");
  EXPECT_EQ(second.wait, 500ms);
  EXPECT_EQ(waiter.waits, (std::vector<nanoseconds>{0ms, 500ms}));
  // A caller that keeps the keys' settings with other ones of its own is told, key by key.
  call.more_keys.front().apply_params = false;
  call.more_keys.front().params.permits_per_second = 4.0;
  const Admission followed = admit(call);
  EXPECT_FALSE(followed.followed);
  ASSERT_EQ(followed.more_followed.size(), 1u);
  ASSERT_TRUE(followed.more_followed.front());
  EXPECT_EQ(followed.more_followed.front()->params.permits_per_second, 2.0);
}

// `status` lists a call of several keys while it waits for its turn, and no longer once the wait
// ends, a stop signal included.
TEST_F(Admit, AWaitForSeveralKeysIsShownUntilItEnds) {
  AdmissionRequest call = call_over_two_keys();
  call.show_wait = show_waits();
  EXPECT_EQ(admit(call).result, AdmissionResult::admitted);
  EXPECT_TRUE(shown.empty());  // no wait: nothing to show
  const nanoseconds asked_at = clock.now();
  EXPECT_EQ(admit(call).result, AdmissionResult::admitted);
  EXPECT_EQ(shown_during_waits, (std::vector<bool>{false, true}));
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_EQ(shown.front().keys, (std::vector<std::string>{"api", "all"}));
  EXPECT_EQ(shown.front().held_by, "all");
  EXPECT_EQ(shown.front().waits, (std::vector<nanoseconds>{100ms, 500ms}));
  EXPECT_EQ(shown.front().until, asked_at + 500ms);
  EXPECT_TRUE(showing.expired());

  waiter.signal_during_wait = waiter.waits.size() + 1;
  EXPECT_EQ(admit(call).result, AdmissionResult::interrupted);
  EXPECT_EQ(shown.size(), 2u);
  EXPECT_TRUE(showing.expired());
  // One key: nothing to tell about keys.
  waiter.received = 0;
  waiter.signal_during_wait.reset();
  AdmissionRequest one = request();
  one.show_wait = call.show_wait;
  admit(one);
  admit(one);
  EXPECT_EQ(shown.size(), 2u);
}

TEST_F(Admit, TryRefusesWithoutWaitingOrBooking) {
  admit(request());
  EXPECT_EQ(admit(request(0ns)).result, AdmissionResult::refused);
  EXPECT_EQ(waiter.waits, (std::vector<nanoseconds>{0ms}));
  // Nothing was booked by the refusal: the next caller waits one interval, not two.
  EXPECT_EQ(admit(request()).result, AdmissionResult::admitted);
  EXPECT_EQ(waiter.waits.back(), 100ms);
}

TEST_F(Admit, TimeoutLetsThroughWhatIsDueInTime) {
  admit(request());
  EXPECT_EQ(admit(request(99ms)).result, AdmissionResult::refused);
  EXPECT_EQ(admit(request(100ms)).result, AdmissionResult::admitted);
}

TEST_F(Admit, WaitsForASlotInPollIntervalsThenForThePermit) {
  admit(request());  // the next permit is due in 100 ms
  slots.free_at = clock.now() + 25ms;
  waiter.waits.clear();
  const Admission admission = admit(request(nanoseconds::max(), 2));
  EXPECT_EQ(admission.result, AdmissionResult::admitted);
  EXPECT_TRUE(admission.slot);
  // Three looks at the slots (at 0, 10 and 20 ms), a free one at 30 ms, then the permit's turn.
  EXPECT_EQ(waiter.waits, (std::vector<nanoseconds>{10ms, 10ms, 10ms, 70ms}));
}

TEST_F(Admit, TimeoutCoversTheWaitForASlot) {
  slots.free_at = clock.now() + 1s;
  const Admission admission = admit(request(25ms, 1));
  EXPECT_EQ(admission.result, AdmissionResult::refused);
  EXPECT_FALSE(admission.slot);
  EXPECT_EQ(waiter.waits, (std::vector<nanoseconds>{10ms, 10ms, 5ms}));
  // No permit was booked: the next caller with a free slot goes at once.
  slots.free_at = 0ns;
  waiter.waits.clear();
  EXPECT_EQ(admit(request(0ns, 1)).result, AdmissionResult::admitted);
}

TEST_F(Admit, TimeoutLeftAfterTheSlotBoundsThePermit) {
  admit(request());  // the next permit is due in 100 ms
  slots.free_at = clock.now() + 50ms;
  // 50 ms spent waiting for the slot leave 50 ms: exactly enough for the permit due by then.
  EXPECT_EQ(admit(request(100ms, 1)).result, AdmissionResult::admitted);
  admit(request());
  slots.free_at = clock.now() + 50ms;  // the same with 1 ms less is 1 ms short
  EXPECT_EQ(admit(request(99ms, 1)).result, AdmissionResult::refused);
}

TEST_F(Admit, SignalWhileWaitingForThePermitRunsNothing) {
  admit(request());
  waiter.signal_during_wait = 2;
  const Admission admission = admit(request(nanoseconds::max(), 1));
  EXPECT_EQ(admission.result, AdmissionResult::interrupted);
  EXPECT_EQ(admission.signal, SIGINT);
  EXPECT_FALSE(admission.slot);  // the slot is given back
}

TEST_F(Admit, SignalWhileWaitingForASlot) {
  slots.free_at = clock.now() + 1s;
  waiter.signal_during_wait = 1;
  const Admission admission = admit(request(nanoseconds::max(), 1));
  EXPECT_EQ(admission.result, AdmissionResult::interrupted);
  EXPECT_EQ(waiter.waits.size(), 1u);
}

// A store that a stop signal interrupts while it waits for its lock or its answer.
class InterruptedStore final : public stores::BucketStore {
 public:
  stores::Reservation reserve(const stores::PermitRequest&, io::Waiter&) override {
    return {.granted = false, .wait = {}, .signal = SIGTERM};
  }
  bool set_rate(const stores::RateChange&) override { return false; }
  std::vector<stores::BucketStatus> status(const std::optional<std::string>&) override {
    return {};
  }
  bool reset(const std::string&) override { return false; }
  bool give_back(const stores::UnusedPermits&) override { return false; }
};

TEST_F(Admit, SignalWhileTheStoreIsAskedRunsNothing) {
  InterruptedStore interrupted;
  const Admission admission =
      exec::admit(interrupted, &slots, waiter, request(nanoseconds::max(), 1));
  EXPECT_EQ(admission.result, AdmissionResult::interrupted);
  EXPECT_EQ(admission.signal, SIGTERM);
  EXPECT_FALSE(admission.slot);
}

// The key owns its settings: a later request with others follows them, and is told once.
TEST_F(Admit, SaysOnceWhichSettingsItFollowed) {
  admit(request());
  AdmissionRequest faster = request();
  faster.permits.apply_params = false;
  faster.permits.params.permits_per_second = 20.0;
  const Admission admission = admit(faster);
  ASSERT_TRUE(admission.followed);
  EXPECT_EQ(admission.followed->params.permits_per_second, 10.0);
  EXPECT_FALSE(admit(faster).followed);
}

}  // namespace
}  // namespace ratelimit::exec
