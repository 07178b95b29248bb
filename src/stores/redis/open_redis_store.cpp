#include "stores/redis/open_redis_store.hpp"

#include <fmt/core.h>

#include "stores/redis/redis_store.hpp"

namespace ratelimit::stores::redis {

std::unique_ptr<BucketStore> open_store(const Options& options,
                                        const std::function<void(const std::string&)>& notify,
                                        const std::function<void(const std::string&)>& warn) {
  auto redis = std::make_unique<Store>(options.settings, notify, warn);
  if (options.agent)
    redis->relay_through(RelayClient(options.agent, options.settings, notify, warn));
  if (!options.settings.tls.verify)
    warn(fmt::format("{}: the Redis server's certificate and name are not checked",
                     kTlsInsecureOption));
  return redis;
}

std::string describe_store(const Options& options) {
  return "Redis at " + options.settings.url.shown;
}

}  // namespace ratelimit::stores::redis
