#include "ratelimit/backoff.hpp"

#include <algorithm>
#include <stdexcept>

namespace ratelimit {

using std::chrono::nanoseconds;

namespace {

nanoseconds saturated_sum(nanoseconds t, nanoseconds d) {
  return t > nanoseconds::max() - d ? nanoseconds::max() : t + d;
}

// Recovery starts when requests resume: at the last cut, or at the end of its pause.
nanoseconds resumed_at(const BackoffState& backoff) {
  return std::max(backoff.event_at, backoff.paused_until);
}

}  // namespace

double rate_in_force(const BackoffState& backoff, double configured, nanoseconds now) {
  if (!(backoff.rate_before_cut > 0.0)) return configured;
  const double recovered =
      static_cast<double>(std::max(now - resumed_at(backoff), nanoseconds::zero()).count()) /
      static_cast<double>(kBackoffRecovery.count());
  const double below = 1.0 - recovered;
  const double curve =
      backoff.rate_before_cut * (1.0 - (1.0 - kBackoffCut) * (below * below * below));
  return std::min(configured, std::max(configured * kBackoffFloor, curve));
}

ThrottleOutcome record_throttle(BackoffState& backoff, BucketState& bucket, double configured,
                                const ThrottleReport& report, nanoseconds now) {
  if (report.retry_after < nanoseconds::zero()) throw std::invalid_argument("negative Retry-After");
  if (report.sent_at > now)
    throw std::invalid_argument("a throttled request sent after its report");
  ThrottleOutcome outcome;
  const bool same_event = backoff.rate_before_cut > 0.0 && report.sent_at < backoff.event_at;
  nanoseconds pause_from = now;
  if (same_event) {
    // The event's pause has ended: a late report of its 429s holds nobody back again.
    if (backoff.paused_until > backoff.event_at && now >= backoff.paused_until)
      pause_from = nanoseconds::max();
    else
      pause_from = backoff.event_at;
  } else {
    outcome.new_event = true;
    const bool before_recovered =
        backoff.rate_before_cut > 0.0 && now - resumed_at(backoff) < kBackoffRecovery;
    backoff.rate_before_cut =
        rate_in_force(backoff, configured, now) * (before_recovered ? kBackoffConvergence : 1.0);
    backoff.event_at = now;
    // Credit saved up, or due for the time idle before the report, is what the service just
    // refused.
    bucket.stored_permits = 0.0;
    bucket.next_free = std::max(bucket.next_free, now);
  }
  if (report.retry_after > nanoseconds::zero() && pause_from != nanoseconds::max()) {
    const nanoseconds until = saturated_sum(pause_from, report.retry_after);
    if (until > backoff.paused_until && until > now) {
      backoff.paused_until = until;
      outcome.pause_extended = true;
    }
  }
  if (bucket.next_free < backoff.paused_until) {
    bucket.next_free = backoff.paused_until;
    bucket.stored_permits = 0.0;
  }
  ++backoff.throttles;
  backoff.last_throttle = now;
  return outcome;
}

TokenBucket bucket_in_force(const BucketParams& params, const BucketState& state,
                            const BackoffState& backoff, nanoseconds now) {
  if (backoff.throttles == 0) return TokenBucket(params, state);
  BucketState held = state;
  // No credit builds up during a pause, whatever moved the next free moment back meanwhile (a
  // rate set by hand, a give-back).
  if (held.next_free < backoff.paused_until)
    held = {.stored_permits = 0.0, .next_free = backoff.paused_until};
  BucketParams in_force = params;
  in_force.permits_per_second = rate_in_force(backoff, params.permits_per_second, now);
  if (in_force.permits_per_second == params.permits_per_second) return TokenBucket(params, held);
  TokenBucket slower(in_force, now);
  held.stored_permits = std::min(held.stored_permits, slower.max_permits());
  return TokenBucket(in_force, held);
}

}  // namespace ratelimit
