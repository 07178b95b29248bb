#include "stores/redis/redis_deployment.hpp"

#include <gtest/gtest.h>

#include "usage_error.hpp"

namespace ratelimit::stores::redis {
namespace {

using Kind = Deployment::Kind;

TEST(RedisDeployment, SentinelsWithEverything) {
  const Deployment deployment =
      parse_deployment("redis-sentinel://alice:p%40ss@s1.lan:26380,[::1],s3/cache/2");
  EXPECT_EQ(deployment.kind, Kind::sentinel);
  EXPECT_EQ(deployment.master_name, "cache");
  EXPECT_EQ(deployment.node.user, "alice");
  EXPECT_EQ(deployment.node.password, "p@ss");
  EXPECT_EQ(deployment.node.database, 2);
  EXPECT_EQ(deployment.shown, "redis-sentinel://alice:***@s1.lan:26380,[::1],s3/cache/2");
  ASSERT_EQ(deployment.sentinels.size(), 3U);
  EXPECT_EQ(deployment.sentinels[0].host, "s1.lan");
  EXPECT_EQ(deployment.sentinels[0].port, 26380);
  EXPECT_EQ(deployment.sentinels[1].host, "::1");
  EXPECT_EQ(deployment.sentinels[1].port, 26379);
  EXPECT_EQ(deployment.sentinels[2].host, "s3");
  EXPECT_EQ(deployment.sentinels[2].port, 26379);
  EXPECT_EQ(deployment.sentinels[2].shown, "redis-sentinel://s3");
  // The sentinels are asked without the master's password.
  EXPECT_TRUE(deployment.sentinels[0].password.empty());
}

TEST(RedisDeployment, SentinelDefaults) {
  const Deployment deployment = parse_deployment("redis-sentinel://127.0.0.1:5000/m");
  EXPECT_EQ(deployment.master_name, "m");
  EXPECT_EQ(deployment.node.database, 0);
  EXPECT_TRUE(deployment.node.password.empty());
  ASSERT_EQ(deployment.sentinels.size(), 1U);
  EXPECT_EQ(deployment.sentinels[0].port, 5000);
}

TEST(RedisDeployment, OtherUrlsNameOneServer) {
  const Deployment deployment = parse_deployment("redis://:pw@h:7000/1");
  EXPECT_EQ(deployment.kind, Kind::server);
  EXPECT_EQ(deployment.node.host, "h");
  EXPECT_EQ(deployment.node.port, 7000);
  EXPECT_EQ(deployment.shown, "redis://:***@h:7000/1");
}

TEST(RedisDeployment, BadSentinelUrlsNameTheUrlWithoutThePassword) {
  expect_refusals(
      parse_deployment,
      {
          {"redis-sentinel://:secret@h:1",
           "bad Redis URL 'redis-sentinel://:***@h:1': expected /MASTER_NAME after the sentinels: "
           "redis-sentinel://host:port[,host:port...]/MASTER_NAME[/db]"},
          {"redis-sentinel://:secret@h:1/",
           "bad Redis URL 'redis-sentinel://:***@h:1/': no master name after the sentinels"},
          {"redis-sentinel://:secret@h:1,,h:2/m",
           "bad Redis URL 'redis-sentinel://:***@h:1,,h:2/m': an empty sentinel address"},
          {"redis-sentinel://:secret@h:99999/m",
           "bad Redis URL 'redis-sentinel://:***@h:99999/m': the port must be a number from 1 to "
           "65535"},
          {"redis-sentinel://:secret@h:1/m/x",
           "bad Redis URL 'redis-sentinel://:***@h:1/m/x': the database after '/' must be a "
           "number"},
          {"redis-sentinel://secret@h:1/m",
           "bad Redis URL 'redis-sentinel://***@h:1/m': a user needs a password: [user]:password@"},
          {"redis-sentinel:///m", "bad Redis URL 'redis-sentinel:///m': an empty sentinel address"},
      });
}

TEST(RedisDeployment, NodeAddressKeepsTheCredentials) {
  const Address seed = parse_url("redis://u:pw@seed:7000/0");
  const Address node = node_address(seed, "127.0.0.1", 7002);
  EXPECT_EQ(node.host, "127.0.0.1");
  EXPECT_EQ(node.port, 7002);
  EXPECT_EQ(node.password, "pw");
  EXPECT_EQ(node.shown, "redis://127.0.0.1:7002");
  EXPECT_EQ(node_address(seed, "::1", 7).shown, "redis://[::1]:7");
}

}  // namespace
}  // namespace ratelimit::stores::redis
