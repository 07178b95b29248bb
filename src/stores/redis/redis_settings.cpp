#include "stores/redis/redis_settings.hpp"

namespace ratelimit::stores::redis {

void Settings::parse_url() {
  deployment = url.written.empty() ? Deployment{} : parse_deployment(url);
}

}  // namespace ratelimit::stores::redis
