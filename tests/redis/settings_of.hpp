#pragma once

#include <chrono>
#include <string>

#include "stores/redis/redis_settings.hpp"

namespace ratelimit::testing {

// The settings of a store or topology at `url`, read as --redis and check_options() read it.
inline stores::redis::Settings settings_of(
    const std::string& url, std::chrono::milliseconds timeout,
    const stores::redis::TlsOptions& tls = {},
    std::chrono::milliseconds failover_timeout = stores::redis::kDefaultFailoverTimeout) {
  stores::redis::Settings settings{
      .url = url, .tls = tls, .timeout = timeout, .failover_timeout = failover_timeout};
  settings.parse_url();
  return settings;
}

}  // namespace ratelimit::testing
