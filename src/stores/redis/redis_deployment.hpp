#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stores/redis/redis_url.hpp"

// Which kind of Redis deployment a URL names, and where to start; no I/O.
namespace ratelimit::stores::redis {

struct Deployment {
  // server: one server, which may turn out to be a node of a Cluster (its MOVED and ASK replies
  // are followed). sentinel: the master that the sentinels name.
  enum class Kind { server, sentinel };
  Kind kind = Kind::server;
  // server: the server. sentinel: the master's user, password and database (not its host).
  Address node;
  // sentinel: asked in turn, without AUTH.
  std::vector<Address> sentinels;
  std::string master_name;
  // The URL as errors show it: the password, if any, as "***".
  std::string shown;
};

// Parses what parse_url does, and
// `redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/MASTER_NAME[/db]` (a sentinel's
// port defaults to 26379). Throws UsageError naming the URL as shown and what is wrong with it.
Deployment parse_deployment(const Url& url);

// The address of the node at `host`:`port` with the user, password and database of `credentials`,
// shown as redis://host:port.
Address node_address(const Address& credentials, const std::string& host, int port);

}  // namespace ratelimit::stores::redis
