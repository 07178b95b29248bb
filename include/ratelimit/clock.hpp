#pragma once

#include <chrono>

namespace ratelimit {

// Monotonic time source and sleeper. The core never reads time any other way, so tests inject a
// fake whose sleep only advances its own counter.
class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since an arbitrary fixed origin.
  virtual std::chrono::nanoseconds now() = 0;
  // Returns at once when d is zero or negative.
  virtual void sleep_for(std::chrono::nanoseconds d) = 0;
};

// std::chrono::steady_clock and a real sleep.
Clock& system_clock();

}  // namespace ratelimit
