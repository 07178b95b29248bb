#include "ratelimit/rate_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ratelimit {

using std::chrono::nanoseconds;

RateLimiter RateLimiter::bursty(double permits_per_second, Clock& clock, double max_burst_seconds) {
  BucketParams params;
  params.shape = BucketShape::bursty;
  params.permits_per_second = permits_per_second;
  params.max_burst_seconds = max_burst_seconds;
  return RateLimiter(params, clock);
}

RateLimiter RateLimiter::warming_up(double permits_per_second, nanoseconds warmup, Clock& clock,
                                    double cold_factor) {
  BucketParams params;
  params.shape = BucketShape::warming_up;
  params.permits_per_second = permits_per_second;
  params.warmup = warmup;
  params.cold_factor = cold_factor;
  return RateLimiter(params, clock);
}

RateLimiter RateLimiter::classic(double permits_per_second, double capacity, Clock& clock) {
  if (!(capacity >= 0.0) || std::isinf(capacity)) {
    std::ostringstream shown;
    shown << capacity;
    throw std::invalid_argument("capacity must be finite and not negative, got " + shown.str());
  }
  BucketParams params;
  params.shape = BucketShape::bursty;
  params.permits_per_second = permits_per_second;
  params.max_burst_seconds = capacity / permits_per_second;
  params.start_full = true;
  params.pay_first = true;
  return RateLimiter(params, clock);
}

RateLimiter::RateLimiter(const BucketParams& params, Clock& clock)
    : clock_(clock), bucket_(params, clock.now()) {}

RateLimiter::RateLimiter(RateLimiter&& other) noexcept
    : clock_(other.clock_), bucket_([&other] {
        std::lock_guard lock(other.mutex_);
        return other.bucket_;
      }()) {}

nanoseconds RateLimiter::acquire(std::int64_t permits) {
  const nanoseconds wait = reserve(permits);
  clock_.sleep_for(wait);
  return wait;
}

bool RateLimiter::try_acquire(std::int64_t permits, nanoseconds timeout) {
  validate_permits(permits);
  nanoseconds wait;
  {
    std::lock_guard lock(mutex_);
    const nanoseconds now = clock_.now();
    if (bucket_.wait_for(permits, now) > std::max(timeout, nanoseconds::zero())) return false;
    wait = bucket_.reserve(permits, now);
  }
  clock_.sleep_for(wait);
  return true;
}

nanoseconds RateLimiter::reserve(std::int64_t permits) {
  std::lock_guard lock(mutex_);
  return bucket_.reserve(permits, clock_.now());
}

void RateLimiter::set_rate(double permits_per_second) {
  std::lock_guard lock(mutex_);
  bucket_.set_rate(permits_per_second, clock_.now());
}

double RateLimiter::rate() const {
  std::lock_guard lock(mutex_);
  return bucket_.params().permits_per_second;
}

}  // namespace ratelimit
