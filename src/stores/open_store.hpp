#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stores/agent_link.hpp"
#include "stores/bucket_store.hpp"
#include "stores/fallback_store.hpp"
#include "stores/redis/open_redis_store.hpp"
#include "stores/state_file/open_state_file_store.hpp"
#include "stores/store_option.hpp"

namespace ratelimit::stores {

// Where the shared buckets are, as the command line says. Each store's options are its own
// (STORE/STORE_options.hpp or STORE/STORE_store.hpp); a new store is one more folder, one more
// member here and one more line in open_store() and in store_options().
struct StoresOptions {
  // This host's store: it keeps the buckets unless a shared store is named, and stands in for
  // that store under OnUnavailable::local.
  state_file::Options local;
  // A store shared by every host, with what to do while it cannot answer; none without a URL.
  redis::Options redis;
  // Told why a record was discarded (--verbose).
  std::function<void(const std::string&)> notify = [](const std::string&) {};
  // Told that the shared store failed and what happens instead, and that it answers again.
  std::function<void(const std::string&)> warn = [](const std::string&) {};
};

// Every option the stores declare, reading into StoresOptions, in the order --help lists them.
const std::vector<StoreOption<StoresOptions>>& store_options();
// Checks what each store's options say together, once all are read, and completes what is read
// from them together (Redis's URL parsed). Throws UsageError.
void check_store_options(StoresOptions& options);

// Whether a store shared by every host is named (else this host's keeps the buckets).
bool names_shared_store(const StoresOptions& options);
// The store of shared buckets. Throws what the chosen store's opening throws.
std::unique_ptr<BucketStore> open_store(const StoresOptions& options);
// What the host agent runs for its clients: the shared stores' connections of one route, their
// TLS sessions kept in `state_dir` (as a process that connects itself keeps them).
std::unique_ptr<AgentStores> open_agent_stores(const std::string& state_dir);
// The route of a request to the agent: the requests of one route are answered by one
// AgentStores, in turn, in the order they came; those of different routes independently, so that
// a store that hangs holds up its own callers alone. Empty for a request of a form that no store
// reads (another version's), which is answered that it is not understood.
std::string agent_route(std::string_view request);
// Where the buckets are, for messages.
std::string describe_store(const StoresOptions& options);

}  // namespace ratelimit::stores
