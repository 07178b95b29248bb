#include "backends/fallback_backend.hpp"

namespace ratelimit::backends {

FallbackBackend::FallbackBackend(std::unique_ptr<BucketBackend> shared, OnUnavailable policy,
                                 BucketBackend& local, Warn warn)
    : shared_(std::move(shared)), policy_(policy), local_(local), warn_(std::move(warn)) {}

Reservation FallbackBackend::reserve(const PermitRequest& request) {
  if (!failed_) {
    try {
      return shared_->reserve(request);
    } catch (const BackendUnavailable& error) {
      if (policy_ == OnUnavailable::fail) throw;
      failed_ = true;
      if (policy_ == OnUnavailable::allow) {
        warn_(std::string(error.what()) + "; running unthrottled (--on-redis-error=allow)");
      } else {
        warn_(std::string(error.what()) + "; using this host's bucket '" + request.key +
              "' (--on-redis-error=local)");
      }
    }
  }
  if (policy_ == OnUnavailable::local) return local_.reserve(request);
  return {.granted = true, .wait = std::chrono::nanoseconds::zero()};
}

std::vector<BucketStatus> FallbackBackend::status(const std::optional<std::string>& key) {
  return shared_->status(key);
}

bool FallbackBackend::reset(const std::string& key) { return shared_->reset(key); }

}  // namespace ratelimit::backends
