#include "backends/bucket_backend.hpp"

#include <algorithm>

namespace ratelimit::backends {

Reservation decide(TokenBucket& bucket, const PermitRequest& request,
                   std::chrono::nanoseconds now) {
  if (request.apply_params && bucket.params() != request.params)
    bucket.reconfigure(request.params, now);
  if (!bucket.can_acquire(now, request.timeout))
    return {.granted = false, .wait = bucket.state().next_free - now};
  return {.granted = true, .wait = bucket.reserve(request.permits, now)};
}

BucketStatus describe(const std::string& key, TokenBucket bucket, std::chrono::nanoseconds now) {
  // Reconfiguring with the same parameters only brings the stored permits up to now.
  bucket.reconfigure(bucket.params(), now);
  return {
      .key = key,
      .problem = {},
      .params = bucket.params(),
      .stored_permits = bucket.state().stored_permits,
      .next_free_in = std::max(bucket.state().next_free - now, std::chrono::nanoseconds::zero())};
}

}  // namespace ratelimit::backends
