#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backends/bucket_backend.hpp"
#include "backends/inflight_slots.hpp"

namespace ratelimit::backends {

// Where the shared buckets are, as the command line says.
struct BackendOptions {
  // The state directory; empty: $RATELIMIT_STATE_DIR, $XDG_RUNTIME_DIR/ratelimit,
  // /tmp/ratelimit-UID. It also keeps the --max-inflight slots, whatever the store.
  std::string state_dir;
  // Told why a record was discarded (--verbose).
  std::function<void(const std::string&)> notify = [](const std::string&) {};
};

// The store of shared buckets. Throws UnsafeStateError (77) for a state directory another user
// could tamper with, BackendUnavailable (69) for one that cannot be created or opened.
std::unique_ptr<BucketBackend> open_backend(const BackendOptions& options);
// The --max-inflight slots of this host.
std::unique_ptr<InflightSlots> open_inflight_slots(const BackendOptions& options);

}  // namespace ratelimit::backends
