#include "backends/open_backend.hpp"

#include "backends/redis/redis_relay.hpp"

namespace ratelimit::backends {

std::unique_ptr<BucketBackend> open_backend(const BackendOptions& options) {
  const auto open_local = [options] {
    return open_state_file_store(options.local, options.notify);
  };
  std::unique_ptr<BucketBackend> shared;
  if (options.redis) shared = open_redis_store(*options.redis, options.notify, options.warn);
  if (!shared) return open_local();
  return std::make_unique<FallbackBackend>(std::move(shared), describe_store(*options.redis),
                                           options.on_unavailable, open_local, options.warn);
}

std::unique_ptr<AgentStores> open_agent_stores() { return std::make_unique<RedisRelay>(); }

std::string describe_store(const BackendOptions& options) {
  return options.redis ? describe_store(*options.redis) : describe_store(options.local);
}

}  // namespace ratelimit::backends
