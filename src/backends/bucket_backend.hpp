#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/waiter.hpp"
#include "ratelimit/token_bucket.hpp"

// The contract of a store of shared buckets (design.md §5): the state file on one host, Redis
// across hosts. Every store reaches the same decisions on the same state, through decide(), and
// passes tests/golden_vectors.txt.
namespace ratelimit::backends {

// Permits wanted from a named bucket that other processes share.
struct PermitRequest {
  std::string key;
  // The bucket is made with these parameters if it does not exist yet.
  BucketParams params;
  // True: `params` replace the bucket's from now on when they differ, as set_rate does (stored
  // permits rescaled). False: the bucket's parameters are kept.
  bool apply_params = true;
  std::int64_t permits = 1;
  // On the waiter's timeline (monotonic_now()): granted only if the permits are due by then
  // (Guava tryAcquire); the store's own waits (a lock, a round trip) count against it, and a call
  // that cannot get its answer by then is refused. A deadline already past never waits for the
  // store. nanoseconds::max(): no limit.
  std::chrono::nanoseconds deadline = std::chrono::nanoseconds::max();
};

struct Reservation {
  bool granted = false;
  // How long until the permits may be used; when refused, how long that would have been (zero
  // when the store could not be asked in time).
  std::chrono::nanoseconds wait{0};
  // Not granted because a stop signal (SIGINT, SIGTERM, SIGHUP) cut the call short: that signal.
  int signal = 0;
  // The bucket's parameters that this request replaced (apply_params, and they differed).
  std::optional<BucketParams> replaced_params;
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

// Where shared buckets are kept. A store that cannot answer throws BackendUnavailable (exit 69);
// a bucket that must not be used (another machine's record, an unsafe file) UnsafeStateError (77).
class BucketBackend {
 public:
  virtual ~BucketBackend() = default;
  // Atomically applies the request's parameters (if asked) and books its permits if they are
  // due by its deadline. Waits only through `waiter`, so a stop signal ends the call at once.
  virtual Reservation reserve(const PermitRequest& request, io::Waiter& waiter) = 0;
  // A new rate for every user of `key` from now on, as Guava's setRate; false if there is no
  // such bucket.
  virtual bool set_rate(const std::string& key, double permits_per_second) = 0;
  // The buckets kept, sorted by key; only `key`'s when given.
  virtual std::vector<BucketStatus> status(const std::optional<std::string>& key) = 0;
  // Forgets a bucket; false if there was none.
  virtual bool reset(const std::string& key) = 0;
};

// The decision on a bucket loaded at `now` (on the request's deadline's timeline), shared by every
// backend.
Reservation decide(TokenBucket& bucket, const PermitRequest& request, std::chrono::nanoseconds now);

// What status shows of a usable bucket at `now`.
BucketStatus describe(const std::string& key, TokenBucket bucket, std::chrono::nanoseconds now);

}  // namespace ratelimit::backends
