#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backends/bucket_backend.hpp"

namespace ratelimit::backends {

// What to do when a store shared by every host cannot answer.
enum class OnUnavailable {
  fail,   // BackendUnavailable reaches main: exit 69, the command is not run
  allow,  // grant every request at once (unthrottled), after one warning
  local,  // take the permits from this host's bucket of the same key instead
};

// A shared store with a policy for its failures. Once the store failed, the rest of the run stays
// with the policy's answer: a request that failed may have been booked, so it is never retried,
// and a pipe does not flip between two buckets chunk by chunk.
class FallbackBackend final : public BucketBackend {
 public:
  using OpenLocal = std::function<std::unique_ptr<BucketBackend>()>;
  using Warn = std::function<void(const std::string&)>;

  // `open_local` opens this host's store, the first time it is needed. `warn` is told once what
  // failed and what happens instead, followed by `policy_said_as` in parentheses unless empty
  // (how the user chose the policy, e.g. "--on-redis-error=allow").
  FallbackBackend(std::unique_ptr<BucketBackend> shared, OnUnavailable policy, OpenLocal open_local,
                  Warn warn, std::string policy_said_as = {});

  Reservation reserve(const PermitRequest& request, io::Waiter& waiter) override;
  // set_rate, status and reset are about the shared store: its failure is always an error.
  bool set_rate(const std::string& key, double permits_per_second,
                const KeySchedule& schedule) override;
  std::vector<BucketStatus> status(const std::optional<std::string>& key) override;
  bool reset(const std::string& key) override;
  void give_back(const std::string& key, std::int64_t permits) override;

 private:
  std::unique_ptr<BucketBackend> shared_;
  OnUnavailable policy_;
  OpenLocal open_local_;
  Warn warn_;
  std::string policy_said_as_;
  bool failed_ = false;
  std::unique_ptr<BucketBackend> local_;
};

}  // namespace ratelimit::backends
