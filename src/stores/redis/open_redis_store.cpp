#include "stores/redis/open_redis_store.hpp"

#include <fmt/core.h>

#include "stores/redis/redis_deployment.hpp"
#include "stores/redis/redis_store.hpp"

namespace ratelimit::stores::redis {

std::unique_ptr<BucketStore> open_redis_store(const Options& options,
                                              const std::function<void(const std::string&)>& notify,
                                              const std::function<void(const std::string&)>& warn) {
  auto redis = std::make_unique<Store>(parse_redis_deployment(options.url), options.timeout, notify,
                                       options.tls, options.failover_timeout, warn);
  if (options.agent)
    redis->relay_through(RelayClient(options.agent,
                                     {.url = options.url,
                                      .tls = options.tls,
                                      .timeout = options.timeout,
                                      .failover_timeout = options.failover_timeout},
                                     notify, warn));
  if (!options.tls.verify)
    warn(fmt::format("{}: the Redis server's certificate and name are not checked",
                     kTlsInsecureOption));
  return redis;
}

std::string describe_redis_store(const Options& options) { return "Redis at " + options.url.shown; }

}  // namespace ratelimit::stores::redis
