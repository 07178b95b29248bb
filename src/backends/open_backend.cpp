#include "backends/open_backend.hpp"

#include <span>

#include "backends/redis/redis_relay.hpp"

namespace ratelimit::backends {
namespace {

// A store's options, each reading into its member `own` of BackendOptions.
template <typename Options>
void add_store(std::vector<StoreOption<BackendOptions>>& all,
               std::span<const StoreOption<Options>> declared, Options BackendOptions::*own) {
  for (const StoreOption<Options>& option : declared)
    all.push_back(
        {option.text, [read = option.read, own](BackendOptions& options, const GivenValue& value) {
           read(options.*own, value);
         }});
}

}  // namespace

const std::vector<StoreOption<BackendOptions>>& store_options() {
  static const std::vector<StoreOption<BackendOptions>> all = [] {
    std::vector<StoreOption<BackendOptions>> options;
    add_store(options, redis_store_options(), &BackendOptions::redis);
    return options;
  }();
  return all;
}

void check_store_options(const BackendOptions& options) { check_redis_options(options.redis); }

bool names_shared_store(const BackendOptions& options) { return !options.redis.url.empty(); }

std::unique_ptr<BucketBackend> open_backend(const BackendOptions& options) {
  const auto open_local = [options] {
    return open_state_file_store(options.local, options.notify);
  };
  std::unique_ptr<BucketBackend> shared;
  if (names_shared_store(options))
    shared = open_redis_store(options.redis, options.notify, options.warn);
  if (!shared) return open_local();
  return std::make_unique<FallbackBackend>(std::move(shared), describe_store(options.redis),
                                           options.redis.on_unavailable, open_local, options.warn);
}

std::unique_ptr<AgentStores> open_agent_stores(const std::string& state_dir) {
  return std::make_unique<RedisRelay>(state_dir);
}

std::string agent_route(std::string_view request) { return RedisRelay::route(request); }

std::string describe_store(const BackendOptions& options) {
  return names_shared_store(options) ? describe_store(options.redis)
                                     : describe_store(options.local);
}

}  // namespace ratelimit::backends
