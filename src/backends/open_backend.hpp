#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backends/agent_link.hpp"
#include "backends/bucket_backend.hpp"
#include "backends/fallback_backend.hpp"
#include "backends/redis/redis_store.hpp"
#include "backends/state_file/state_file_store.hpp"

namespace ratelimit::backends {

// Where the shared buckets are, as the command line says. Each store's options are its own
// (STORE/STORE_store.hpp); a new store is one more folder, one more member here and one more
// line in open_backend().
struct BackendOptions {
  // This host's store: it keeps the buckets unless a shared store is named, and stands in for
  // that store under OnUnavailable::local.
  StateFileOptions local;
  // A store shared by every host.
  std::optional<RedisOptions> redis;
  // What to do when the shared store cannot answer.
  UnavailablePolicy on_unavailable;
  // Told why a record was discarded (--verbose).
  std::function<void(const std::string&)> notify = [](const std::string&) {};
  // Told that the shared store failed and what happens instead, and that it answers again.
  std::function<void(const std::string&)> warn = [](const std::string&) {};
};

// The store of shared buckets. Throws what the chosen store's opening throws.
std::unique_ptr<BucketBackend> open_backend(const BackendOptions& options);
// What the host agent runs for its clients: the shared stores' connections.
std::unique_ptr<AgentStores> open_agent_stores();
// Where the buckets are, for messages.
std::string describe_store(const BackendOptions& options);

}  // namespace ratelimit::backends
