#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ratelimit/token_bucket.hpp"

namespace ratelimit::backends {

// The store of shared buckets cannot answer (exit 69, EX_UNAVAILABLE); the message names it and
// the cause.
class BackendUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Permits wanted from a named bucket that other processes share.
struct PermitRequest {
  std::string key;
  // The bucket is made with these parameters if it does not exist yet.
  BucketParams params;
  // True: `params` replace the bucket's from now on when they differ, as set_rate does (stored
  // permits rescaled). False: the bucket's parameters are kept.
  bool apply_params = true;
  std::int64_t permits = 1;
  // Granted only if the permits are due within this long (Guava tryAcquire): zero never waits,
  // nanoseconds::max() waits as long as it takes.
  std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max();
};

struct Reservation {
  bool granted = false;
  // Granted: how long until the permits may be used. Refused: how long until the bucket is free.
  std::chrono::nanoseconds wait{0};
};

// One bucket as `ratelimit status` shows it, as of now.
struct BucketStatus {
  std::string key;
  // Why the record cannot be used (it then counts as a fresh bucket); empty when it can.
  std::string problem;
  BucketParams params;
  double stored_permits = 0.0;
  std::chrono::nanoseconds next_free_in{0};
};

// Where shared buckets are kept (a state file per key, later Redis). Every backend reaches the same
// decisions on the same state, through decide().
class BucketBackend {
 public:
  virtual ~BucketBackend() = default;
  // Atomically applies the request's parameters and books its permits if they are due in time.
  virtual Reservation reserve(const PermitRequest& request) = 0;
  // The buckets kept, sorted by key; only `key`'s when given.
  virtual std::vector<BucketStatus> status(const std::optional<std::string>& key) = 0;
  // Forgets a bucket; false if there was none.
  virtual bool reset(const std::string& key) = 0;
};

// The decision on a bucket loaded at `now`, shared by every backend.
Reservation decide(TokenBucket& bucket, const PermitRequest& request, std::chrono::nanoseconds now);

// What status shows of a usable bucket at `now`.
BucketStatus describe(const std::string& key, TokenBucket bucket, std::chrono::nanoseconds now);

}  // namespace ratelimit::backends
