#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "backends/agent_link.hpp"
#include "backends/bucket_backend.hpp"
#include "backends/redis/redis_topology.hpp"
#include "backends/redis/redis_url.hpp"

// The Redis store as open_backend() chooses it: its options, parsed here, and opening it.
namespace ratelimit::backends {

struct RedisOptions {
  // redis://... or unix://... (redis_url.hpp).
  std::string url;
  // Bounds the connection and every command.
  std::chrono::milliseconds timeout{1000};
  // Bounds a failover: the search for the new master (redis_topology.hpp).
  std::chrono::milliseconds failover_timeout = kDefaultFailoverTimeout;
  RedisTlsOptions tls;  // for a rediss:// URL
  // The host agent, which keeps the connections for every process of the user: commands go
  // through it when it is there. None: always to the server itself.
  std::shared_ptr<AgentLink> agent{};
};

// Buckets shared by every host that reaches the server; connects at the first call. Throws
// UsageError (64) for a bad URL, naming it without its password. `notify` is told why a record
// was discarded (--verbose), `warn` that the server's certificate goes unchecked or that Sentinel
// has two masters.
std::unique_ptr<BucketBackend> open_redis_store(
    const RedisOptions& options, const std::function<void(const std::string&)>& notify,
    const std::function<void(const std::string&)>& warn);

// Where the buckets are, for messages: "Redis at URL", the password hidden.
std::string describe_store(const RedisOptions& options);

}  // namespace ratelimit::backends
