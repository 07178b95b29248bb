#include "stores/open_store.hpp"

#include <span>

#include "stores/redis/redis_relay.hpp"

namespace ratelimit::stores {
namespace {

// A store's options, each reading into its member `own` of StoresOptions.
template <typename Options>
void add_store(std::vector<StoreOption<StoresOptions>>& all,
               std::span<const StoreOption<Options>> declared, Options StoresOptions::*own) {
  for (const StoreOption<Options>& option : declared)
    all.push_back(
        {option.text, [read = option.read, own](StoresOptions& options, const GivenValue& value) {
           read(options.*own, value);
         }});
}

}  // namespace

const std::vector<StoreOption<StoresOptions>>& store_options() {
  static const std::vector<StoreOption<StoresOptions>> all = [] {
    std::vector<StoreOption<StoresOptions>> options;
    add_store(options, redis::store_options(), &StoresOptions::redis);
    return options;
  }();
  return all;
}

void check_store_options(StoresOptions& options) { redis::check_options(options.redis); }

bool names_shared_store(const StoresOptions& options) {
  return !options.redis.settings.url.written.empty();
}

std::unique_ptr<BucketStore> open_store(const StoresOptions& options) {
  const auto open_local = [options] {
    return state_file::open_store(options.local, options.notify);
  };
  std::unique_ptr<BucketStore> shared;
  if (names_shared_store(options))
    shared = redis::open_store(options.redis, options.notify, options.warn);
  if (!shared) return open_local();
  return std::make_unique<FallbackStore>(std::move(shared), redis::describe_store(options.redis),
                                         options.redis.on_unavailable, open_local, options.warn);
}

std::unique_ptr<AgentStores> open_agent_stores(const std::string& state_dir) {
  return std::make_unique<redis::Relay>(state_dir);
}

std::string agent_route(std::string_view request) { return redis::Relay::route(request); }

std::string describe_store(const StoresOptions& options) {
  return names_shared_store(options) ? redis::describe_store(options.redis)
                                     : state_file::describe_store(options.local);
}

}  // namespace ratelimit::stores
