#pragma once

#include <chrono>
#include <span>
#include <vector>

#include "ratelimit/backoff.hpp"
#include "ratelimit/quota.hpp"
#include "ratelimit/token_bucket.hpp"
#include "stores/bucket_store.hpp"

// Several keys decided together (BucketStore::reserve_all), all or nothing, the same way in every
// store: a multi-key call is several single-key records decided at once, each by the single-key
// pieces of decide().
namespace ratelimit::stores {

// One key of a multi-key call, as its store loaded it (under its lock, or in its script).
struct KeyInCall {
  TokenBucket& bucket;
  KeySchedule& schedule;
  std::vector<Quota>& quotas;
  const PermitRequest& request;
  // Its back-off: the key is decided at its rate in force, not before its pause ends (decide()).
  const BackoffState& backoff;
};

// A key of a call as its store loaded it: `limits` holds its bucket, schedule, quotas and back-off.
template <typename Limits>
KeyInCall key_in_call(Limits& limits, const PermitRequest& request) {
  return {.bucket = limits.bucket,
          .schedule = limits.schedule,
          .quotas = limits.quotas,
          .request = request,
          .backoff = limits.backoff};
}

// The decision over several keys loaded at `now`: each key's settings applied as decide() applies
// them, then each key's moment (its rate's and quotas', as decide() finds it); the call is granted
// at the latest of them if that is by the deadline, no key's quota is never to allow the permits,
// and (refuse_quota_wait) no key's quota holds them back. Granted, every key books its permits
// at that moment, as a request made then (the time until then idle on the key, so stored), and
// its quotas count them there, so that no key's turn is spent while another still waits and no
// key grants more than its rate and burst by the moment the permits are used. Refused, no key
// books anything.
KeysReservation decide_all(std::span<KeyInCall> keys, std::chrono::nanoseconds now);

}  // namespace ratelimit::stores
