#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "backends/bucket_backend.hpp"
#include "backends/fallback_backend.hpp"
#include "backends/redis/redis_url.hpp"
#include "exec/inflight_slots.hpp"

namespace ratelimit::backends {

// Where the shared buckets are, as the command line says.
struct BackendOptions {
  // The state directory; empty: $RATELIMIT_STATE_DIR, $XDG_RUNTIME_DIR/ratelimit,
  // /tmp/ratelimit-UID. It also keeps the --max-inflight slots, whatever the store.
  std::string state_dir;
  // Told why a record was discarded (--verbose).
  std::function<void(const std::string&)> notify = [](const std::string&) {};
  // A Redis URL: the buckets are kept there (the state directory only for the slots and, under
  // OnUnavailable::local, as the fallback). Empty: the state directory.
  std::string redis_url;
  std::chrono::milliseconds redis_timeout{1000};
  RedisTlsOptions redis_tls;  // for a rediss:// URL
  OnUnavailable on_redis_error = OnUnavailable::fail;
  // Told once that Redis failed and what happens instead.
  std::function<void(const std::string&)> warn = [](const std::string&) {};
};

// The store of shared buckets. Throws UnsafeStateError (77) for a state directory another user
// could tamper with, BackendUnavailable (69) for one that cannot be created or opened,
// std::invalid_argument (64) for a bad Redis URL (naming it without its password).
std::unique_ptr<BucketBackend> open_backend(const BackendOptions& options);
// The --max-inflight slots of this host.
std::unique_ptr<InflightSlots> open_inflight_slots(const BackendOptions& options);

}  // namespace ratelimit::backends
