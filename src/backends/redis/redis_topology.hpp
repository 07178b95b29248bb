#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/redis/redis_connection.hpp"
#include "backends/redis/redis_deployment.hpp"
#include "io/waiter.hpp"

namespace ratelimit::backends {

// The connections to a deployment, and which node answers for a key: the one server; the node of
// a Cluster that a MOVED or ASK reply names; the master that the sentinels name, found again after
// a failover.
class RedisTopology {
 public:
  // Told which node answers, when that is news (for --verbose).
  using Notify = std::function<void(const std::string&)>;

  // Connects at the first command, over TLS with `tls` to rediss:// nodes (sentinels are asked
  // in the clear). `timeout` bounds the search for a master after a failover, and the request
  // sent again there. Throws as RedisTls for TLS files that cannot be used, UsageError for TLS
  // options without rediss://.
  RedisTopology(RedisDeployment deployment, std::chrono::milliseconds timeout, Notify notify,
                const RedisTlsOptions& tls = {});

  // Sends `arguments`, a command on `redis_key` alone, to the node that serves the key, within
  // `deadline`; as RedisConnection::command otherwise. A Cluster's MOVED or ASK is followed once
  // (the command did not run). Under Sentinel, a READONLY reply (a demoted master: nothing was
  // written) and a connection lost before the deadline (the master went away) send the command
  // once more, to the master the sentinels name within `timeout`: the one sent before may have
  // booked, so a key can pay twice for one request, never grant twice. A command whose deadline
  // passed is never sent again.
  RedisValue command(const std::string& redis_key, const std::vector<std::string>& arguments,
                     RedisDeadline& deadline);
  // Connects to the node that serves `redis_key`, if not connected yet, within `deadline`.
  void connect(const std::string& redis_key, RedisDeadline& deadline);
  // Calls `visit` with a connection to each master: the server, each master of its Cluster, or the
  // master that the sentinels name.
  void for_each_master(RedisDeadline& deadline, const std::function<void(RedisConnection&)>& visit);

  const std::string& shown_url() const { return deployment_.shown; }

 private:
  RedisValue command_on_master(const std::vector<std::string>& arguments, RedisDeadline& deadline);
  RedisValue command_in_cluster(const std::string& redis_key,
                                const std::vector<std::string>& arguments, RedisDeadline& deadline);
  // The connection to the master, searched for within `search` if there is none.
  RedisConnection& master(RedisDeadline& search);
  // The master the sentinels name that says it is one (ROLE), asked within `search`.
  RedisConnection find_master(RedisDeadline& search);
  // The kept connection to `node` (named by its shown URL), connected again if it was lost.
  RedisConnection& node_connection(const RedisAddress& node, RedisDeadline& deadline);
  const RedisTls* tls_for(const RedisAddress& node) const {
    return node.tls && tls_ ? &*tls_ : nullptr;
  }

  RedisDeployment deployment_;
  std::chrono::milliseconds timeout_;
  Notify notify_;
  std::optional<RedisTls> tls_;
  // sentinel: the master, and where it is (shown).
  std::optional<RedisConnection> master_;
  std::string master_shown_;
  // server: by shown URL; the server itself and the Cluster nodes redirected to.
  std::map<std::string, RedisConnection> nodes_;
  // The node a MOVED named for a Redis key.
  std::map<std::string, RedisAddress> key_nodes_;
  // The redirects said under --verbose: each once, not once per request while a slot migrates.
  std::set<std::string> redirects_said_;
};

}  // namespace ratelimit::backends
