#include "backends/bucket_backend.hpp"

#include <algorithm>

namespace ratelimit::backends {

using std::chrono::nanoseconds;

Reservation decide(TokenBucket& bucket, const PermitRequest& request, nanoseconds now) {
  Reservation reservation;
  if (request.apply_params && bucket.params() != request.params) {
    reservation.replaced_params = bucket.params();
    bucket.reconfigure(request.params, now);
  }
  const nanoseconds timeout = request.deadline == nanoseconds::max()
                                  ? nanoseconds::max()
                                  : std::max(request.deadline - now, nanoseconds::zero());
  const nanoseconds wait = bucket.wait_for(request.permits, now);
  reservation.granted = wait <= timeout;
  reservation.wait = reservation.granted ? bucket.reserve(request.permits, now) : wait;
  return reservation;
}

BucketStatus describe(const std::string& key, TokenBucket bucket, nanoseconds now) {
  // Reconfiguring with the same parameters only brings the stored permits up to now.
  bucket.reconfigure(bucket.params(), now);
  return {.key = key,
          .problem = {},
          .params = bucket.params(),
          .stored_permits = bucket.state().stored_permits,
          .next_free_in = std::max(bucket.state().next_free - now, nanoseconds::zero())};
}

}  // namespace ratelimit::backends
