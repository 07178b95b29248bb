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
  // The classic token bucket (golang.org/x/time/rate, bucket4j) where Guava differs. With both:
  // capacity max_burst_seconds * rate, refill at the rate, starts full, a request waits for its
  // tokens.
  //
  // A new bucket holds its whole burst instead of nothing. Bursty only: a warming-up bucket already
  // starts full, of cold permits, so validate() refuses the combination.
  bool start_full = false;
  // A request waits until its own permits exist and leaves no debt for the next one, so that over
  // any window at most the burst plus rate * window permits are granted. Guava's default (false):
  // a request is granted at once and the next one waits for it. With warming_up, a request waits
  // its own (cold) cost, so even the first one on a cold bucket waits.
  bool pay_first = false;

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
//
// The whole arithmetic, for a store that keeps the state itself (the Redis script). Let S be
// stored_permits, F next_free, max = max_permits(), I the stable interval (1/rate):
//   new bucket at now:  F = now; S = max if warming_up or start_full, else 0.
//   refill at now:      if now > F: S = min(max, S + (now - F) / cool_down_interval); F = now.
//                       (cool_down_interval is I for bursty, warmup / max for warming_up.)
//   request of n:       refill; spend = min(n, S);
//                       cost = stored_cost(spend) + (n - spend) * I, truncated to whole ns
//                       (stored_cost is 0 for bursty, the warm-up trapezoid for warming_up);
//                       wait = F - now (Guava: pay later) or F + cost - now (pay_first), at least
//                       0; then S -= spend, F += cost.
//   try with timeout T: granted iff that wait <= max(T, 0); a refused request changes nothing.
// pay_first only changes the wait returned, never the state: the same requests at the same times
// leave the same S and F either way.
class TokenBucket {
 public:
  // A new bucket at time `now`: bursty starts empty (full with start_full), warming_up starts cold
  // (full).
  // Throws std::invalid_argument naming the bad value.
  TokenBucket(const BucketParams& params, std::chrono::nanoseconds now);
  // A bucket restored from saved parameters and state.
  TokenBucket(const BucketParams& params, const BucketState& state);

  // Books `permits` now and returns how long the caller must wait before using them: until the
  // previous request is paid for (Guava), or with pay_first until these permits exist.
  // permits must be positive.
  std::chrono::nanoseconds reserve(std::int64_t permits, std::chrono::nanoseconds now);
  // What reserve(permits, now) would return, without booking: a request is granted within a
  // timeout T iff this is at most T.
  std::chrono::nanoseconds wait_for(std::int64_t permits, std::chrono::nanoseconds now) const;
  // Applies new parameters from `now` on; stored permits are rescaled in proportion to the new
  // maximum, as Guava's setRate does.
  void reconfigure(const BucketParams& params, std::chrono::nanoseconds now);
  void set_rate(double permits_per_second, std::chrono::nanoseconds now);

  const BucketParams& params() const { return params_; }
  const BucketState& state() const { return state_; }
  double max_permits() const { return max_permits_; }

 private:
  // A request booked: the state after it, and the caller's wait.
  struct Booking {
    BucketState state;
    std::chrono::nanoseconds wait;
  };

  void derive();
  // The state brought up to `now`: permits stored while idle, next_free not in the past.
  BucketState refilled(std::chrono::nanoseconds now) const;
  Booking book(std::int64_t permits, std::chrono::nanoseconds now) const;
  void rescale_stored_permits(double old_max_permits);
  std::int64_t stored_permits_wait_ns(double stored_permits, double permits_to_take) const;

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
