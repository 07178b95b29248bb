#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

#include "ratelimit/clock.hpp"
#include "ratelimit/token_bucket.hpp"

namespace ratelimit {

// Guava's RateLimiter (SmoothBursty and SmoothWarmingUp), and the classic token bucket, over an
// injectable clock. Thread-safe.
class RateLimiter {
 public:
  // SmoothBursty: up to max_burst_seconds * rate unused permits are stored; starts empty.
  static RateLimiter bursty(double permits_per_second, Clock& clock = system_clock(),
                            double max_burst_seconds = 1.0);
  // SmoothWarmingUp: starts cold; the wait per permit falls from cold_factor/rate to 1/rate over
  // `warmup`.
  static RateLimiter warming_up(double permits_per_second, std::chrono::nanoseconds warmup,
                                Clock& clock = system_clock(), double cold_factor = 3.0);
  // The classic token bucket (golang.org/x/time/rate, bucket4j): holds at most `capacity`
  // permits, refilled continuously at the rate, starts full, and a request waits until its own
  // permits exist (try_acquire refuses unless they exist within the timeout) instead of leaving a
  // debt for the next one. acquire(n) with n above the capacity waits for the missing permits.
  static RateLimiter classic(double permits_per_second, double capacity,
                             Clock& clock = system_clock());

  RateLimiter(const BucketParams& params, Clock& clock);
  // Moves the bucket; the mutex is not state, each object has its own.
  RateLimiter(RateLimiter&& other) noexcept;
  RateLimiter& operator=(RateLimiter&&) = delete;

  // Waits through clock.sleep_for; returns the wait.
  std::chrono::nanoseconds acquire(std::int64_t permits = 1);
  bool try_acquire(std::int64_t permits = 1,
                   std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero());
  // Books permits now, returns the wait, does not sleep.
  std::chrono::nanoseconds reserve(std::int64_t permits = 1);
  void set_rate(double permits_per_second);
  double rate() const;

 private:
  Clock& clock_;
  mutable std::mutex mutex_;
  TokenBucket bucket_;
};

}  // namespace ratelimit
