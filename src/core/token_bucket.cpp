#include "ratelimit/token_bucket.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ratelimit {
namespace {

using std::chrono::nanoseconds;
using Rep = nanoseconds::rep;

constexpr double kNanosPerSecond = 1e9;
constexpr Rep kMaxRep = std::numeric_limits<Rep>::max();
constexpr Rep kMinRep = std::numeric_limits<Rep>::min();
// 2^63: the first double that no longer fits in a signed 64-bit integer.
constexpr double kRepLimit = 9223372036854775808.0;

// As Java's (long) cast: truncates toward zero, saturates at the range, NaN becomes 0.
Rep truncate_saturated(double value) {
  if (std::isnan(value)) return 0;
  if (value >= kRepLimit) return kMaxRep;
  if (value < -kRepLimit) return kMinRep;
  return static_cast<Rep>(value);
}

Rep add_saturated(Rep a, Rep b) {
  Rep sum;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? kMaxRep : kMinRep;
  return sum;
}

Rep subtract_saturated(Rep a, Rep b) {
  Rep difference;
  if (__builtin_sub_overflow(a, b, &difference)) return b < 0 ? kMaxRep : kMinRep;
  return difference;
}

std::string describe(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

[[noreturn]] void reject(const std::string& what, const std::string& value) {
  throw std::invalid_argument(what + ", got " + value);
}

}  // namespace

void validate(const BucketParams& params) {
  if (!(params.permits_per_second > 0.0))
    reject("rate must be positive", describe(params.permits_per_second));
  switch (params.shape) {
    case BucketShape::bursty:
      if (!(params.max_burst_seconds >= 0.0) || std::isinf(params.max_burst_seconds))
        reject("max burst seconds must be finite and not negative",
               describe(params.max_burst_seconds));
      break;
    case BucketShape::warming_up:
      if (params.warmup < nanoseconds::zero())
        reject("warm-up must not be negative", std::to_string(params.warmup.count()) + "ns");
      if (!(params.cold_factor >= 1.0) || std::isinf(params.cold_factor))
        reject("cold factor must be finite and at least 1", describe(params.cold_factor));
      if (params.start_full)
        throw std::invalid_argument(
            "start full applies to bursty buckets only: a warming-up bucket starts cold, full of "
            "slow permits");
      break;
  }
}

void validate_permits(std::int64_t permits) {
  if (permits <= 0) reject("permits must be positive", std::to_string(permits));
}

TokenBucket::TokenBucket(const BucketParams& params, nanoseconds now) : params_(params) {
  validate(params_);
  derive();
  state_.next_free = now;
  if (params_.start_full)
    state_.stored_permits = max_permits_;
  else
    rescale_stored_permits(0.0);
}

TokenBucket::TokenBucket(const BucketParams& params, const BucketState& state)
    : params_(params), state_(state) {
  validate(params_);
  if (!(state.stored_permits >= 0.0))
    reject("stored permits must not be negative", describe(state.stored_permits));
  derive();
}

void TokenBucket::derive() {
  const double rate = params_.permits_per_second;
  stable_interval_ns_ = kNanosPerSecond / rate;  // 0 for +inf, +inf for a denormal rate
  threshold_permits_ = 0.0;
  slope_ = 0.0;
  switch (params_.shape) {
    case BucketShape::bursty:
      max_permits_ = params_.max_burst_seconds == 0.0 ? 0.0 : params_.max_burst_seconds * rate;
      cool_down_interval_ns_ = stable_interval_ns_;
      return;
    case BucketShape::warming_up: {
      const double warmup_ns = static_cast<double>(params_.warmup.count());
      if (warmup_ns == 0.0) {
        max_permits_ = 0.0;
        cool_down_interval_ns_ = stable_interval_ns_;
        return;
      }
      if (stable_interval_ns_ == 0.0) {
        // An infinite rate stores infinitely many permits, all below the threshold.
        threshold_permits_ = max_permits_ = std::numeric_limits<double>::infinity();
        cool_down_interval_ns_ = 0.0;
        return;
      }
      const double cold_interval_ns = stable_interval_ns_ * params_.cold_factor;
      threshold_permits_ = 0.5 * warmup_ns / stable_interval_ns_;
      max_permits_ =
          threshold_permits_ + 2.0 * warmup_ns / (stable_interval_ns_ + cold_interval_ns);
      const double warmup_permits = max_permits_ - threshold_permits_;
      if (std::isfinite(warmup_permits) && warmup_permits > 0.0)
        slope_ = (cold_interval_ns - stable_interval_ns_) / warmup_permits;
      cool_down_interval_ns_ = warmup_ns / max_permits_;
      return;
    }
  }
}

BucketState TokenBucket::refilled(nanoseconds now) const {
  BucketState state = state_;
  if (now <= state.next_free) return state;
  if (max_permits_ > 0.0) {
    const double idle_ns =
        static_cast<double>(subtract_saturated(now.count(), state.next_free.count()));
    const double new_permits = idle_ns / cool_down_interval_ns_;
    state.stored_permits = std::min(max_permits_, state.stored_permits + new_permits);
  }
  state.next_free = now;
  return state;
}

void TokenBucket::rescale_stored_permits(double old_max_permits) {
  const bool warming = params_.shape == BucketShape::warming_up;
  double& stored = state_.stored_permits;
  if (old_max_permits == std::numeric_limits<double>::infinity()) {
    // Leaving an infinite rate: bursty keeps a full burst, warming-up is fully warm.
    stored = warming ? 0.0 : max_permits_;
  } else if (old_max_permits == 0.0) {
    // A new bucket: bursty starts empty, warming-up starts cold.
    stored = warming ? max_permits_ : 0.0;
  } else if (stored > 0.0) {
    stored = stored * max_permits_ / old_max_permits;
  }
}

Rep TokenBucket::stored_permits_wait_ns(double stored_permits, double permits_to_take) const {
  if (params_.shape == BucketShape::bursty) return 0;
  Rep wait = 0;
  const double above_threshold = stored_permits - threshold_permits_;
  if (above_threshold > 0.0) {
    // The area under the line from stable_interval at the threshold to cold_interval at the
    // maximum, between the permits we hold and the permits left after this request.
    const double taken_above = std::min(above_threshold, permits_to_take);
    const double length = (stable_interval_ns_ + above_threshold * slope_) +
                          (stable_interval_ns_ + (above_threshold - taken_above) * slope_);
    wait = truncate_saturated(taken_above * length / 2.0);
    permits_to_take -= taken_above;
  }
  return add_saturated(wait, truncate_saturated(stable_interval_ns_ * permits_to_take));
}

TokenBucket::Booking TokenBucket::book(std::int64_t permits, nanoseconds now) const {
  validate_permits(permits);
  BucketState state = refilled(now);
  const double requested = static_cast<double>(permits);
  const double stored_to_spend = std::min(requested, state.stored_permits);
  const double fresh_permits = requested - stored_to_spend;
  const Rep cost = add_saturated(stored_permits_wait_ns(state.stored_permits, stored_to_spend),
                                 truncate_saturated(fresh_permits * stable_interval_ns_));
  const nanoseconds previous_paid_at = state.next_free;
  state.next_free = nanoseconds(add_saturated(state.next_free.count(), cost));
  state.stored_permits -= stored_to_spend;
  // Guava's caller goes once the previous request is paid for; a paying-first caller once its own
  // permits are, which is where the next caller's turn begins, so it inherits no debt.
  const nanoseconds go_at = params_.pay_first ? state.next_free : previous_paid_at;
  return {state, nanoseconds(std::max<Rep>(subtract_saturated(go_at.count(), now.count()), 0))};
}

nanoseconds TokenBucket::reserve(std::int64_t permits, nanoseconds now) {
  const Booking booking = book(permits, now);
  state_ = booking.state;
  return booking.wait;
}

nanoseconds TokenBucket::wait_for(std::int64_t permits, nanoseconds now) const {
  return book(permits, now).wait;
}

void TokenBucket::reconfigure(const BucketParams& params, nanoseconds now) {
  validate(params);
  state_ = refilled(now);
  const double old_max_permits = max_permits_;
  params_ = params;
  derive();
  rescale_stored_permits(old_max_permits);
}

void TokenBucket::set_rate(double permits_per_second, nanoseconds now) {
  BucketParams changed = params_;
  changed.permits_per_second = permits_per_second;
  reconfigure(changed, now);
}

}  // namespace ratelimit
