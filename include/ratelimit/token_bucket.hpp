#pragma once

#include <chrono>
#include <cstdint>

namespace ratelimit {

// How a bucket stores unused permits.
enum class BucketShape {
  bursty,      // Guava SmoothBursty: up to max_burst_seconds of permits, all free to spend.
  warming_up,  // Guava SmoothWarmingUp: stored permits are "cold" and cost more, down to 1/rate.
};

// What the user configures. Plain data so that a state file or a Redis script can keep it.
struct BucketParams {
  BucketShape shape = BucketShape::bursty;
  double permits_per_second = 1.0;
  double max_burst_seconds = 1.0;      // bursty only
  std::chrono::nanoseconds warmup{0};  // warming_up only
  double cold_factor = 3.0;            // warming_up only

  friend bool operator==(const BucketParams&, const BucketParams&) = default;
};

// The whole mutable state of a bucket. Times are on the clock's timeline.
struct BucketState {
  double stored_permits = 0.0;
  std::chrono::nanoseconds next_free{0};

  friend bool operator==(const BucketState&, const BucketState&) = default;
};

// Guava RateLimiter arithmetic on a plain value: no clock, no lock, no I/O. Every call takes the
// current time, so the same state replayed with the same times reaches the same decisions wherever
// it is kept.
class TokenBucket {
 public:
  // A new bucket at time `now`: bursty starts empty, warming_up starts cold (full).
  // Throws std::invalid_argument naming the bad value.
  TokenBucket(const BucketParams& params, std::chrono::nanoseconds now);
  // A bucket restored from saved parameters and state.
  TokenBucket(const BucketParams& params, const BucketState& state);

  // Books `permits` now and returns how long the caller must wait before using them (the cost of
  // this request is paid by the next one). permits must be positive.
  std::chrono::nanoseconds reserve(std::int64_t permits, std::chrono::nanoseconds now);
  // True iff a request made now would be granted within `timeout` (negative counts as zero).
  bool can_acquire(std::chrono::nanoseconds now, std::chrono::nanoseconds timeout) const;
  // Applies new parameters from `now` on; stored permits are rescaled in proportion to the new
  // maximum, as Guava's setRate does.
  void reconfigure(const BucketParams& params, std::chrono::nanoseconds now);
  void set_rate(double permits_per_second, std::chrono::nanoseconds now);

  const BucketParams& params() const { return params_; }
  const BucketState& state() const { return state_; }
  double max_permits() const { return max_permits_; }

 private:
  void derive();
  void resync(std::chrono::nanoseconds now);
  void rescale_stored_permits(double old_max_permits);
  std::int64_t stored_permits_wait_ns(double permits_to_take) const;

  BucketParams params_;
  BucketState state_;
  // Derived from params_ by derive(); all intervals in nanoseconds per permit.
  double stable_interval_ns_ = 0.0;
  double max_permits_ = 0.0;
  double threshold_permits_ = 0.0;
  double slope_ = 0.0;
  double cool_down_interval_ns_ = 0.0;
};

// Throws std::invalid_argument naming the bad value.
void validate(const BucketParams& params);
void validate_permits(std::int64_t permits);

}  // namespace ratelimit
