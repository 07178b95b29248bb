#pragma once

#include <chrono>
#include <string>

#include "stores/redis/redis_deployment.hpp"
#include "stores/redis/redis_url.hpp"

// Where the Redis store's server is and how to reach it: one value, read once from the options
// (redis_options.hpp) and passed whole to the store, its topology and the relay, which sends it
// to the agent.
namespace ratelimit::stores::redis {

// --redis-failover-timeout's default: Sentinel's default down-after-milliseconds (30 s) and the
// election after it, with room to spare.
inline constexpr std::chrono::milliseconds kDefaultFailoverTimeout{60'000};

struct Settings {
  // redis://..., rediss://..., unix://... or redis-sentinel://... as written and shown; empty:
  // no Redis.
  Url url{};
  // What `url` names, parsed once all options are read (parse_url()).
  Deployment deployment{};
  TlsOptions tls{};  // for a rediss:// URL
  // Bounds the connection and every command.
  std::chrono::milliseconds timeout{1000};
  // Bounds a failover: the search for the new master (redis_topology.hpp).
  std::chrono::milliseconds failover_timeout = kDefaultFailoverTimeout;

  // Reads `url` into `deployment` (an empty one: no Redis). Throws UsageError naming it as shown
  // and what is wrong with it.
  void parse_url();
};

}  // namespace ratelimit::stores::redis
