#include "ratelimit/quota.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ratelimit {
namespace {

using std::chrono::nanoseconds;
using Rep = nanoseconds::rep;

constexpr nanoseconds kShortestPeriod = std::chrono::microseconds(1);
constexpr nanoseconds kLongestPeriod = std::chrono::hours(24 * 3653);

Rep floor_div(Rep a, Rep b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// The slot's first moment, saturated for slots beyond the timeline.
nanoseconds slot_start(std::int64_t slot, nanoseconds slot_length) {
  Rep start;
  if (__builtin_mul_overflow(slot, slot_length.count(), &start))
    return slot > 0 ? nanoseconds::max() : nanoseconds::min();
  return nanoseconds(start);
}

}  // namespace

void validate(const QuotaParams& params) {
  if (params.limit < 1 || params.limit > kLargestExactCount)
    throw std::invalid_argument("quota limit must be from 1 to 2^53 - 1, got " +
                                std::to_string(params.limit));
  if (params.period < kShortestPeriod || params.period > kLongestPeriod)
    throw std::invalid_argument("quota period must be from 1us to 10 years, got " +
                                std::to_string(params.period.count()) + "ns");
}

Quota::Quota(const QuotaParams& params, nanoseconds now) : Quota(params, QuotaState{}) {
  state_.newest_slot = slot_of(now);
}

Quota::Quota(const QuotaParams& params, const QuotaState& state) : params_(params), state_(state) {
  validate(params_);
  for (const std::int64_t count : state_.counts)
    if (count < 0)
      throw std::invalid_argument("quota slot count must not be negative, got " +
                                  std::to_string(count));
  if (state_.passed < 0)
    throw std::invalid_argument("quota passed count must not be negative, got " +
                                std::to_string(state_.passed));
  // Whole microseconds, rounded up so that the K slots cover the period.
  constexpr Rep kSlotsMicros = kQuotaSlots * Rep{1000};
  slot_length_ = nanoseconds((params_.period.count() + kSlotsMicros - 1) / kSlotsMicros * 1000);
}

std::int64_t Quota::slot_of(nanoseconds t) const {
  return floor_div(t.count(), slot_length_.count());
}

nanoseconds Quota::earliest(std::int64_t units, nanoseconds from) const {
  validate_permits(units);
  if (units > params_.limit) return nanoseconds::max();
  const std::int64_t first = std::max(slot_of(from), state_.newest_slot);
  // The slots counted for slot newest + d hold counts[d..C-1] (slots after the newest hold
  // nothing): the sum falls as d grows, and is 0 from d = C on.
  std::int64_t d = std::min<std::int64_t>(first - state_.newest_slot, kQuotaCounts);
  std::int64_t held = 0;
  for (std::int64_t i = d; i < kQuotaCounts; ++i) held += state_.counts[i];
  while (held + units > params_.limit) held -= state_.counts[d++];
  return std::max(from, slot_start(state_.newest_slot + d, slot_length_));
}

void Quota::book(std::int64_t units, nanoseconds at, nanoseconds now) {
  validate_permits(units);
  const std::int64_t slot = std::max(slot_of(at), state_.newest_slot);
  const std::int64_t shift = slot - state_.newest_slot;
  auto& counts = state_.counts;
  if (shift > 0) {
    // What a window ending at now's slot holds of the counts shifted out: used() adds it until
    // the newest slot begins. Earlier ones still count while the key was already booked ahead.
    // Counts index i holds slot newest - (C - 1) + i: in now's window from i = slot(now) - newest.
    const std::int64_t now_slot = slot_of(std::min(now, at));
    std::int64_t passed = state_.newest_slot > now_slot ? state_.passed : 0;
    for (std::int64_t i = std::max<std::int64_t>(now_slot - state_.newest_slot, 0);
         i < std::min<std::int64_t>(shift, kQuotaCounts); ++i)
      passed += counts[i];
    state_.passed = passed;
  }
  if (shift >= kQuotaCounts) {
    counts.fill(0);
  } else if (shift > 0) {
    std::shift_left(counts.begin(), counts.end(), static_cast<std::ptrdiff_t>(shift));
    std::fill(counts.end() - shift, counts.end(), 0);
  }
  state_.newest_slot = slot;
  counts[kQuotaCounts - 1] += units;
}

std::int64_t Quota::used(nanoseconds now) const {
  const std::int64_t now_slot = slot_of(now);
  // Counts index d holds slot newest - (C - 1) + d: those from now's window to now's slot.
  const std::int64_t first = std::max<std::int64_t>(now_slot - state_.newest_slot, 0);
  const std::int64_t last =
      std::min<std::int64_t>(now_slot - state_.newest_slot + kQuotaCounts - 1, kQuotaCounts - 1);
  std::int64_t held = now_slot < state_.newest_slot ? state_.passed : 0;
  for (std::int64_t d = first; d <= last; ++d) held += state_.counts[d];
  // No window holds more than the limit: passed may still count some that have left it.
  return std::min(held, params_.limit);
}

bool QuotaBucket::never(std::int64_t permits) const {
  return std::any_of(quotas_.begin(), quotas_.end(),
                     [permits](const Quota& quota) { return permits > quota.params().limit; });
}

QuotaBucket::Moments QuotaBucket::moments(std::int64_t permits, nanoseconds now) const {
  const nanoseconds rate_wait = rate_.wait_for(permits, now);
  const nanoseconds rate_go =
      rate_wait > nanoseconds::max() - now ? nanoseconds::max() : now + rate_wait;
  nanoseconds go = rate_go;
  for (const Quota& quota : quotas_) go = std::max(go, quota.earliest(permits, rate_go));
  return {rate_go, go};
}

nanoseconds QuotaBucket::wait_for(std::int64_t permits, nanoseconds now) const {
  if (never(permits)) return nanoseconds::max();
  return std::max(moments(permits, now).go - now, nanoseconds::zero());
}

bool QuotaBucket::held_by_quota(std::int64_t permits, nanoseconds now) const {
  if (never(permits)) return true;
  const Moments at = moments(permits, now);
  return at.go > at.rate_go;
}

nanoseconds QuotaBucket::reserve(std::int64_t permits, nanoseconds now, nanoseconds moved_at) {
  if (never(permits)) return nanoseconds::max();
  const Moments at = moments(permits, now);
  rate_.reserve(permits, now);
  // No limit has no turn to move: its next free moment stays now, as a store expects of it.
  if (at.go > at.rate_go && !std::isinf(rate_.params().permits_per_second)) {
    BucketState state = rate_.state();
    const nanoseconds later = at.go - at.rate_go;
    state.next_free =
        state.next_free > nanoseconds::max() - later ? nanoseconds::max() : state.next_free + later;
    rate_ = TokenBucket(rate_.params(), state);
  }
  for (Quota& quota : quotas_) quota.book(permits, std::max(at.go, moved_at), now);
  return std::max(at.go - now, nanoseconds::zero());
}

}  // namespace ratelimit
