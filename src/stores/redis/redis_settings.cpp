#include "stores/redis/redis_settings.hpp"

#include <utility>

namespace ratelimit::stores::redis {

void Settings::read_url(std::string written) {
  if (written.empty()) {
    *this = Settings{.tls = tls, .timeout = timeout, .failover_timeout = failover_timeout};
    return;
  }
  Url read(std::move(written));
  deployment = parse_deployment(read);
  url = std::move(read);
}

}  // namespace ratelimit::stores::redis
