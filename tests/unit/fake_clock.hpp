#pragma once

#include <chrono>
#include <mutex>
#include <vector>

#include "ratelimit/clock.hpp"

namespace ratelimit::testing {

// A clock that only moves when slept on or advanced. It records every sleep, as Guava's
// FakeStopwatch records its events, so a test can assert the exact waits.
class FakeClock final : public Clock {
 public:
  std::chrono::nanoseconds now() override {
    std::lock_guard lock(mutex_);
    return now_;
  }
  void sleep_for(std::chrono::nanoseconds d) override {
    std::lock_guard lock(mutex_);
    sleeps_.push_back(d);
    if (d > std::chrono::nanoseconds::zero()) now_ += d;
  }
  // Time passing outside the limiter (Guava's "U" events): not recorded as a sleep.
  void advance(std::chrono::nanoseconds d) {
    std::lock_guard lock(mutex_);
    now_ += d;
  }
  // The sleeps since the last call.
  std::vector<std::chrono::nanoseconds> take_sleeps() {
    std::lock_guard lock(mutex_);
    return std::exchange(sleeps_, {});
  }

 private:
  std::mutex mutex_;
  std::chrono::nanoseconds now_{1'000'000'000};  // not zero: the core must not assume an origin
  std::vector<std::chrono::nanoseconds> sleeps_;
};

}  // namespace ratelimit::testing
