#include "backends/bucket_backend.hpp"

#include <algorithm>

namespace ratelimit::backends {

Reservation decide(TokenBucket& bucket, const PermitRequest& request,
                   std::chrono::nanoseconds now) {
  if (request.apply_params && bucket.params() != request.params)
    bucket.reconfigure(request.params, now);
  const std::chrono::nanoseconds wait = bucket.wait_for(request.permits, now);
  if (wait > std::max(request.timeout, std::chrono::nanoseconds::zero()))
    return {.granted = false, .wait = wait};
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
