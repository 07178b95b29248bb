#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/agent_link.hpp"
#include "backends/bucket_backend.hpp"
#include "backends/fallback_backend.hpp"
#include "backends/redis/redis_store.hpp"
#include "backends/state_file/state_file_store.hpp"
#include "backends/store_option.hpp"

namespace ratelimit::backends {

// Where the shared buckets are, as the command line says. Each store's options are its own
// (STORE/STORE_options.hpp or STORE/STORE_store.hpp); a new store is one more folder, one more
// member here and one more line in open_backend() and in store_options().
struct BackendOptions {
  // This host's store: it keeps the buckets unless a shared store is named, and stands in for
  // that store under OnUnavailable::local.
  StateFileOptions local;
  // A store shared by every host, with what to do while it cannot answer; none without a URL.
  RedisOptions redis;
  // Told why a record was discarded (--verbose).
  std::function<void(const std::string&)> notify = [](const std::string&) {};
  // Told that the shared store failed and what happens instead, and that it answers again.
  std::function<void(const std::string&)> warn = [](const std::string&) {};
};

// Every option the stores declare, reading into BackendOptions, in the order --help lists them.
const std::vector<StoreOption<BackendOptions>>& store_options();
// Checks what each store's options say together, once all are read. Throws UsageError.
void check_store_options(const BackendOptions& options);

// Whether a store shared by every host is named (else this host's keeps the buckets).
bool names_shared_store(const BackendOptions& options);
// The store of shared buckets. Throws what the chosen store's opening throws.
std::unique_ptr<BucketBackend> open_backend(const BackendOptions& options);
// What the host agent runs for its clients: the shared stores' connections of one route, their
// TLS sessions kept in `state_dir` (as a process that connects itself keeps them).
std::unique_ptr<AgentStores> open_agent_stores(const std::string& state_dir);
// The route of a request to the agent: the requests of one route are answered by one
// AgentStores, in turn, in the order they came; those of different routes independently, so that
// a store that hangs holds up its own callers alone.
std::string agent_route(std::string_view request);
// Where the buckets are, for messages.
std::string describe_store(const BackendOptions& options);

}  // namespace ratelimit::backends
