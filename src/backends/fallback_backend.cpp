#include "backends/fallback_backend.hpp"

#include "errors.hpp"

namespace ratelimit::backends {

FallbackBackend::FallbackBackend(std::unique_ptr<BucketBackend> shared, OnUnavailable policy,
                                 OpenLocal open_local, Warn warn, std::string policy_said_as)
    : shared_(std::move(shared)),
      policy_(policy),
      open_local_(std::move(open_local)),
      warn_(std::move(warn)),
      policy_said_as_(std::move(policy_said_as)) {}

Reservation FallbackBackend::reserve(const PermitRequest& request, io::Waiter& waiter) {
  if (!failed_) {
    try {
      return shared_->reserve(request, waiter);
    } catch (const BackendUnavailable& error) {
      if (policy_ == OnUnavailable::fail) throw;
      failed_ = true;
      const std::string said_as = policy_said_as_.empty() ? "" : " (" + policy_said_as_ + ")";
      if (policy_ == OnUnavailable::allow) {
        warn_(std::string(error.what()) + "; running unthrottled" + said_as);
      } else {
        warn_(std::string(error.what()) + "; using this host's bucket '" + request.key + "'" +
              said_as);
        local_ = open_local_();
      }
    }
  }
  if (local_) return local_->reserve(request, waiter);
  // Unthrottled: the request's timetable and rate stand, so that a pipe following them keeps them.
  return {.granted = true,
          .wait = std::chrono::nanoseconds::zero(),
          .signal = 0,
          .replaced_params = {},
          .replaced_timetable = {},
          .key_timetable = request.schedule.timetable,
          .key_permits_per_second = request.params.permits_per_second};
}

bool FallbackBackend::set_rate(const std::string& key, double permits_per_second,
                               const KeySchedule& schedule) {
  return shared_->set_rate(key, permits_per_second, schedule);
}

std::vector<BucketStatus> FallbackBackend::status(const std::optional<std::string>& key) {
  return shared_->status(key);
}

bool FallbackBackend::reset(const std::string& key) { return shared_->reset(key); }

void FallbackBackend::give_back(const std::string& key, std::int64_t permits) {
  // Where the permits were booked: this host's bucket after a failure, none when unthrottled.
  if (local_)
    local_->give_back(key, permits);
  else if (!failed_)
    shared_->give_back(key, permits);
}

}  // namespace ratelimit::backends
