#pragma once

#include <string>
#include <string_view>

// Where a Redis server is, from a URL the user wrote; no I/O.
namespace ratelimit::backends {

struct RedisAddress {
  enum class Kind { tcp, unix_socket };
  Kind kind = Kind::tcp;
  std::string host;  // tcp: a name or an address (IPv6 without brackets)
  int port = 6379;
  std::string socket_path;  // unix_socket
  int database = 0;
  std::string user;      // empty: the default user
  std::string password;  // empty: no AUTH
  // The URL as errors show it: the password, if any, as "***".
  std::string shown;
};

// Parses `redis://[[user]:password@]host[:port][/db]` and
// `unix://[[user]:password@]/path/redis.sock[?db=N]`; user and password may be %-encoded.
// Throws std::invalid_argument naming the URL (password hidden) and what is wrong with it.
RedisAddress parse_redis_url(std::string_view url);

// `url` with the password of its user part, if any, replaced by "***" (the whole user part when
// it is malformed), so that an error can show even a malformed URL.
std::string hide_password(std::string_view url);

}  // namespace ratelimit::backends
