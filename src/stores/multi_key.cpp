#include "stores/multi_key.hpp"

#include <algorithm>
#include <cmath>

namespace ratelimit::stores {

using std::chrono::nanoseconds;

namespace {

nanoseconds moment_after(nanoseconds now, nanoseconds wait) {
  return wait > nanoseconds::max() - now ? nanoseconds::max() : now + wait;
}

// Books `request`'s permits on `key` at `go`, not before its own moment. As a request made at
// `go`: the key, which no one can book before `go` any more, counts as idle until then (its
// stored permits refill), and its wait from `go` is none, its own moment being no later. With
// pay_first, whose permits need not fit in the burst, the key's turn moves with the permits
// instead (as a quota moves the rate's turn in QuotaBucket), the time in between not stored.
// Either way the quotas count the permits at `go`.
// A key that backs off books at its rate in force and keeps its configured parameters.
BookingSpan book_at(KeyInCall& key, nanoseconds now, nanoseconds go) {
  const std::int64_t permits = key.request.permits;
  const BucketParams configured = key.bucket.params();
  const TokenBucket in_force = bucket_in_force(configured, key.bucket.state(), key.backoff, now);
  const nanoseconds found = in_force.state().next_free;
  QuotaBucket limits(in_force, key.quotas);
  if (!configured.pay_first) {
    limits.reserve(permits, go);
    key.bucket = TokenBucket(configured, limits.rate().state());
    key.quotas = limits.quotas();
    return {.from = found.count(), .until = key.bucket.state().next_free.count()};
  }
  const nanoseconds own_go = moment_after(now, limits.wait_for(permits, now));
  limits.reserve(permits, now, go);
  TokenBucket& rate = limits.rate();
  // No limit has no turn to move: its next free moment stays now, as a store expects of it.
  if (go > own_go && !std::isinf(rate.params().permits_per_second)) {
    BucketState state = rate.state();
    const nanoseconds later = go - own_go;
    state.next_free =
        state.next_free > nanoseconds::max() - later ? nanoseconds::max() : state.next_free + later;
    rate = TokenBucket(rate.params(), state);
  }
  key.bucket = TokenBucket(configured, limits.rate().state());
  key.quotas = limits.quotas();
  return {.from = found.count(), .until = key.bucket.state().next_free.count()};
}

}  // namespace

KeysReservation decide_all(std::span<KeyInCall> keys, nanoseconds now) {
  KeysReservation decision;
  bool never = false;
  bool refused_for_quota = false;
  nanoseconds longest{0};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    KeyInCall& key = keys[i];
    Reservation reservation =
        apply_settings(key.bucket, key.schedule, key.quotas, key.request, now);
    reservation.paused_for = std::max(key.backoff.paused_until - now, nanoseconds::zero());
    reservation.backing_off = key.backoff.throttles > 0;
    const QuotaBucket limits(
        bucket_in_force(key.bucket.params(), key.bucket.state(), key.backoff, now), key.quotas);
    const std::int64_t permits = key.request.permits;
    never = never || limits.never(permits);
    reservation.wait = limits.wait_for(permits, now);
    reservation.held_by_quota = limits.held_by_quota(permits, now);
    if (key.request.refuse_quota_wait && reservation.held_by_quota &&
        reservation.wait > nanoseconds::zero())
      refused_for_quota = true;
    // The first of the latest: a tie is held by the key named first.
    if (reservation.wait > longest) {
      longest = reservation.wait;
      decision.held_by = i;
    }
    decision.keys.push_back(std::move(reservation));
  }
  Reservation& call = decision.call;
  call.wait = longest;
  for (const Reservation& key : decision.keys) {
    call.paused_for = std::max(call.paused_for, key.paused_for);
    call.backing_off = call.backing_off || key.backing_off;
  }
  call.held_by_quota = decision.held_by && decision.keys[*decision.held_by].held_by_quota;
  call.granted = !never && !refused_for_quota && longest <= timeout_of(keys[0].request, now);
  if (!call.granted) return decision;
  const nanoseconds go = moment_after(now, longest);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    Reservation& reservation = decision.keys[i];
    reservation.booked = book_at(keys[i], now, go);
    reservation.granted = true;
  }
  return decision;
}

}  // namespace ratelimit::stores
