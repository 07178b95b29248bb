#include "stores/redis/redis_url.hpp"

#include <gtest/gtest.h>

#include "usage_error.hpp"

namespace ratelimit::stores::redis {
namespace {

using Kind = Address::Kind;

TEST(RedisUrl, KeepsTheTextAndShowsItWithoutThePassword) {
  const Url url("redis://alice:hunter2@cache.lan:6380/3");
  EXPECT_EQ(url.written, "redis://alice:hunter2@cache.lan:6380/3");
  EXPECT_EQ(url.shown, "redis://alice:***@cache.lan:6380/3");
  EXPECT_EQ(Url("unix://:hunter2@/tmp/r.sock").shown, "unix://:***@/tmp/r.sock");
  // Without a colon the whole user part may be a password: hidden whole.
  EXPECT_EQ(Url("redis://hunter2@h").shown, "redis://***@h");
  EXPECT_EQ(Url("redis://cache.lan").shown, "redis://cache.lan");
  // A part of another URL is shown as that URL.
  EXPECT_EQ(Url("redis://h:1", "redis-sentinel://:***@h:1/m").shown, "redis-sentinel://:***@h:1/m");
}

TEST(RedisUrl, TcpWithEverything) {
  const Address address = parse_url("redis://alice:p%40ss:word@cache.lan:6380/3");
  EXPECT_EQ(address.kind, Kind::tcp);
  EXPECT_EQ(address.host, "cache.lan");
  EXPECT_EQ(address.port, 6380);
  EXPECT_EQ(address.database, 3);
  EXPECT_EQ(address.user, "alice");
  EXPECT_EQ(address.password, "p@ss:word");
  EXPECT_EQ(address.shown, "redis://alice:***@cache.lan:6380/3");
}

TEST(RedisUrl, TcpDefaults) {
  const Address address = parse_url("redis://localhost");
  EXPECT_EQ(address.host, "localhost");
  EXPECT_EQ(address.port, 6379);
  EXPECT_EQ(address.database, 0);
  EXPECT_TRUE(address.password.empty());
  EXPECT_EQ(address.shown, "redis://localhost");
  EXPECT_EQ(parse_url("redis://:pw@h").password, "pw");
  EXPECT_EQ(parse_url("redis://:pw@h").user, "");
  EXPECT_EQ(parse_url("redis://[::1]:7000").host, "::1");
  EXPECT_EQ(parse_url("redis://[::1]:7000").port, 7000);
}

TEST(RedisUrl, UnixSocket) {
  const Address address = parse_url("unix:///run/redis/redis.sock?db=2");
  EXPECT_EQ(address.kind, Kind::unix_socket);
  EXPECT_EQ(address.socket_path, "/run/redis/redis.sock");
  EXPECT_EQ(address.database, 2);
  const Address with_password = parse_url("unix://:secret@/tmp/r.sock");
  EXPECT_EQ(with_password.password, "secret");
  EXPECT_EQ(with_password.socket_path, "/tmp/r.sock");
  EXPECT_EQ(with_password.shown, "unix://:***@/tmp/r.sock");
}

TEST(RedisUrl, BadUrlsAreNamedWithoutTheirPassword) {
  expect_refusals(
      parse_url,
      {
          {"http://h",
           "bad Redis URL 'http://h': expected redis[s]://[[user]:password@]host[:port][/db] or "
           "unix:///path[?db=N]"},
          {"redis://:hunter2@h:99999",
           "bad Redis URL 'redis://:***@h:99999': the port must be a number from 1 to 65535"},
          {"redis://h:", "bad Redis URL 'redis://h:': empty port"},
          {"redis://h/x", "bad Redis URL 'redis://h/x': the database after '/' must be a number"},
          {"redis://", "bad Redis URL 'redis://': no host"},
          {"redis://hunter2@h",
           "bad Redis URL 'redis://***@h': a user needs a password: [user]:password@"},
          {"redis://:@h", "bad Redis URL 'redis://:***@h': empty password"},
          {"redis://:a%zz@h",
           "bad Redis URL 'redis://:***@h': a '%' in the user or password is not followed by 2 hex "
           "digits"},
          {"unix://relative.sock",
           "bad Redis URL 'unix://relative.sock': the socket path must be absolute: unix:///path"},
          {"unix:///s?database=1",
           "bad Redis URL 'unix:///s?database=1': the only query parameter is db=N"},
          {"rediss://:hunter2@h:0",
           "bad Redis URL 'rediss://:***@h:0': the port must be a number from 1 to 65535"},
      });
}

TEST(RedisUrl, RedissIsTcpOverTls) {
  const Address address = parse_url("rediss://:pw@cache.example:6380/2");
  EXPECT_EQ(address.kind, Address::Kind::tcp);
  EXPECT_TRUE(address.tls);
  EXPECT_EQ(address.host, "cache.example");
  EXPECT_EQ(address.port, 6380);
  EXPECT_EQ(address.database, 2);
  EXPECT_EQ(address.shown, "rediss://:***@cache.example:6380/2");
  EXPECT_FALSE(parse_url("redis://cache.example").tls);
}

}  // namespace
}  // namespace ratelimit::stores::redis
