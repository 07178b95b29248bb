#include "backends/bucket_backend.hpp"

#include <algorithm>
#include <cmath>

namespace ratelimit::backends {

using std::chrono::nanoseconds;

namespace {

// New parameters, as Guava's setRate when only the rate changes; to or from no limit, afresh.
void change_params(TokenBucket& bucket, const BucketParams& params, nanoseconds now) {
  const double old_rate = bucket.params().permits_per_second;
  if ((std::isinf(old_rate) || std::isinf(params.permits_per_second)) &&
      old_rate != params.permits_per_second)
    bucket = TokenBucket(params, now);
  else
    bucket.reconfigure(params, now);
}

}  // namespace

void change_rate(TokenBucket& bucket, double permits_per_second, nanoseconds now) {
  BucketParams params = bucket.params();
  params.permits_per_second = permits_per_second;
  change_params(bucket, params, now);
}

Reservation decide(TokenBucket& bucket, KeySchedule& schedule, const PermitRequest& request,
                   nanoseconds now) {
  Reservation reservation;
  const auto replace = [&](const BucketParams& params) {
    reservation.replaced_params = bucket.params();
    reservation.replaced_timetable = schedule.timetable;
    change_params(bucket, params, now);
  };
  if (request.apply_params && request.schedule.timetable != schedule.timetable) {
    replace(request.params);
    schedule = request.schedule;
  } else {
    if (!schedule.timetable.empty() && request.schedule.timetable == schedule.timetable &&
        request.schedule.entry_until > schedule.entry_until) {
      schedule.entry_until = request.schedule.entry_until;
      change_rate(bucket, request.params.permits_per_second, now);
    }
    if (request.apply_params) {
      BucketParams wanted = request.params;
      // Under a timetable the rate is the latest entry's, settled above.
      if (!schedule.timetable.empty())
        wanted.permits_per_second = bucket.params().permits_per_second;
      if (wanted != bucket.params()) replace(wanted);
    }
  }
  reservation.key_timetable = schedule.timetable;
  const nanoseconds timeout = request.deadline == nanoseconds::max()
                                  ? nanoseconds::max()
                                  : std::max(request.deadline - now, nanoseconds::zero());
  const nanoseconds wait = bucket.wait_for(request.permits, now);
  reservation.granted = wait <= timeout;
  reservation.wait = reservation.granted ? bucket.reserve(request.permits, now) : wait;
  return reservation;
}

BucketStatus describe(const std::string& key, TokenBucket bucket, KeySchedule schedule,
                      nanoseconds now) {
  // Reconfiguring with the same parameters only brings the stored permits up to now.
  bucket.reconfigure(bucket.params(), now);
  return {.key = key,
          .problem = {},
          .params = bucket.params(),
          .schedule = std::move(schedule),
          .stored_permits = bucket.state().stored_permits,
          .next_free_in = std::max(bucket.state().next_free - now, nanoseconds::zero())};
}

}  // namespace ratelimit::backends
