// exec::admit on a fake clock: when a caller is let through, how long it waited for a slot and
// for its permits, and that a timeout or a signal ends the wait without running the command.
#include "exec/admission.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <optional>
#include <vector>

#include "fake_clock.hpp"

namespace ratelimit::exec {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

// One process's view of buckets kept in memory, deciding as every backend does.
class MemoryBackend final : public backends::BucketBackend {
 public:
  explicit MemoryBackend(Clock& clock) : clock_(clock) {}
  backends::Reservation reserve(const backends::PermitRequest& request) override {
    const nanoseconds now = clock_.now();
    auto [bucket, added] = buckets_.try_emplace(request.key, request.params, now);
    return backends::decide(bucket->second, request, now);
  }
  std::vector<backends::BucketStatus> status(const std::optional<std::string>&) override {
    return {};
  }
  bool reset(const std::string& key) override { return buckets_.erase(key) > 0; }

 private:
  Clock& clock_;
  std::map<std::string, TokenBucket> buckets_;
};

// Waits move the fake clock to their deadline and are recorded; a signal can be set to arrive
// during a given wait; the slots are busy until a given time.
class FakeWaitingRoom final : public WaitingRoom {
 public:
  explicit FakeWaitingRoom(testing::FakeClock& clock) : clock_(clock) {}
  nanoseconds now() override { return clock_.now(); }
  int wait_until(nanoseconds deadline) override {
    waits.push_back(deadline - clock_.now());
    if (signal_during_wait && *signal_during_wait == waits.size()) return SIGINT;
    clock_.advance(std::max(deadline - clock_.now(), nanoseconds::zero()));
    return 0;
  }
  io::FileDescriptor try_take_slot(const std::string&, int) override {
    if (clock_.now() < slots_free_at) return {};
    return io::FileDescriptor(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }

  std::vector<nanoseconds> waits;
  std::optional<std::size_t> signal_during_wait;  // 1 for the first wait
  nanoseconds slots_free_at{0};

 private:
  testing::FakeClock& clock_;
};

class Admit : public ::testing::Test {
 protected:
  AdmissionRequest request(nanoseconds timeout = nanoseconds::max(), int max_inflight = 0) {
    AdmissionRequest request;
    request.permits.key = "api";
    request.permits.params.permits_per_second = 10.0;
    request.permits.timeout = timeout;
    request.max_inflight = max_inflight;
    return request;
  }

  testing::FakeClock clock;
  MemoryBackend backend{clock};
  FakeWaitingRoom room{clock};
};

TEST_F(Admit, FirstCallerAtOnceTheNextAfterItsTurn) {
  EXPECT_EQ(admit(backend, room, request()).result, AdmissionResult::admitted);
  EXPECT_EQ(admit(backend, room, request()).result, AdmissionResult::admitted);
  EXPECT_EQ(room.waits, (std::vector<nanoseconds>{0ms, 100ms}));
}

TEST_F(Admit, TryRefusesWithoutWaitingOrBooking) {
  admit(backend, room, request());
  EXPECT_EQ(admit(backend, room, request(0ns)).result, AdmissionResult::refused);
  EXPECT_EQ(room.waits, (std::vector<nanoseconds>{0ms}));
  // Nothing was booked by the refusal: the next caller waits one interval, not two.
  EXPECT_EQ(admit(backend, room, request()).result, AdmissionResult::admitted);
  EXPECT_EQ(room.waits.back(), 100ms);
}

TEST_F(Admit, TimeoutLetsThroughWhatIsDueInTime) {
  admit(backend, room, request());
  EXPECT_EQ(admit(backend, room, request(99ms)).result, AdmissionResult::refused);
  EXPECT_EQ(admit(backend, room, request(100ms)).result, AdmissionResult::admitted);
}

TEST_F(Admit, WaitsForASlotInPollIntervalsThenForThePermit) {
  admit(backend, room, request());  // the next permit is due in 100 ms
  room.slots_free_at = clock.now() + 25ms;
  room.waits.clear();
  const Admission admission = admit(backend, room, request(nanoseconds::max(), 2));
  EXPECT_EQ(admission.result, AdmissionResult::admitted);
  EXPECT_TRUE(admission.slot);
  // Three looks at the slots (at 0, 10 and 20 ms), a free one at 30 ms, then the permit's turn.
  EXPECT_EQ(room.waits, (std::vector<nanoseconds>{10ms, 10ms, 10ms, 70ms}));
}

TEST_F(Admit, TimeoutCoversTheWaitForASlot) {
  room.slots_free_at = clock.now() + 1s;
  const Admission admission = admit(backend, room, request(25ms, 1));
  EXPECT_EQ(admission.result, AdmissionResult::refused);
  EXPECT_FALSE(admission.slot);
  EXPECT_EQ(room.waits, (std::vector<nanoseconds>{10ms, 10ms, 5ms}));
  // No permit was booked: the next caller with a free slot goes at once.
  room.slots_free_at = 0ns;
  room.waits.clear();
  EXPECT_EQ(admit(backend, room, request(0ns, 1)).result, AdmissionResult::admitted);
}

TEST_F(Admit, TimeoutLeftAfterTheSlotBoundsThePermit) {
  admit(backend, room, request());  // the next permit is due in 100 ms
  room.slots_free_at = clock.now() + 50ms;
  // 50 ms spent waiting for the slot leave 50 ms: exactly enough for the permit due by then.
  EXPECT_EQ(admit(backend, room, request(100ms, 1)).result, AdmissionResult::admitted);
  admit(backend, room, request());
  room.slots_free_at = clock.now() + 50ms;  // the same with 1 ms less is 1 ms short
  EXPECT_EQ(admit(backend, room, request(99ms, 1)).result, AdmissionResult::refused);
}

TEST_F(Admit, SignalWhileWaitingForThePermitRunsNothing) {
  admit(backend, room, request());
  room.signal_during_wait = 2;
  const Admission admission = admit(backend, room, request(nanoseconds::max(), 1));
  EXPECT_EQ(admission.result, AdmissionResult::interrupted);
  EXPECT_EQ(admission.signal, SIGINT);
  EXPECT_FALSE(admission.slot);  // the slot is given back
}

TEST_F(Admit, SignalWhileWaitingForASlot) {
  room.slots_free_at = clock.now() + 1s;
  room.signal_during_wait = 1;
  const Admission admission = admit(backend, room, request(nanoseconds::max(), 1));
  EXPECT_EQ(admission.result, AdmissionResult::interrupted);
  EXPECT_EQ(room.waits.size(), 1u);
}

}  // namespace
}  // namespace ratelimit::exec
