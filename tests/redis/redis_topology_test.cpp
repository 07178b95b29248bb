// Topology on one server (its Sentinel and Cluster paths: tests/e2e/test_redis_sentinel.sh,
// test_redis_cluster*.sh), against a real redis-server that each test starts.
#include "stores/redis/redis_topology.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "redis_server.hpp"
#include "settings_of.hpp"
#include "stores/redis/redis_deployment.hpp"

namespace ratelimit::stores::redis {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

constexpr std::chrono::milliseconds kTimeout = 2s;

Topology topology_of(const std::string& url) {
  const auto quiet = [](const std::string&) {};
  return Topology(testing::settings_of(url, kTimeout, {}, kTimeout), quiet, quiet);
}

TEST(RedisTopology, OneServerTakesCommandsAndPipelines) {
  RedisServer server("s3cr3t");
  Topology topology = topology_of(server.unix_url());
  EXPECT_EQ(topology.shown_url().find("s3cr3t"), std::string::npos) << topology.shown_url();
  Deadline deadline(kTimeout);
  EXPECT_EQ(topology.command("k", {"SET", "k", "1"}, deadline).text, "OK");
  const std::optional<std::vector<Value>> replies = topology.pipeline(
      {{"k", {"INCR", "k"}}, {"other", {"INCRBY", "other", "5"}}, {"k", {"GET", "k"}}}, deadline);
  ASSERT_TRUE(replies);
  ASSERT_EQ(replies->size(), 3u);
  EXPECT_EQ((*replies)[0].integer, 2);
  EXPECT_EQ((*replies)[1].integer, 5);
  EXPECT_EQ((*replies)[2].text, "2");
}

TEST(RedisTopology, AWrongPasswordIsRefused) {
  RedisServer server("s3cr3t");
  Topology topology = topology_of("unix://:wrong@" + server.socket_path());
  Deadline deadline(kTimeout);
  EXPECT_THROW(topology.command("k", {"PING"}, deadline), StoreUnavailable);
}

// A Cluster's redirections and refusals mean that the command did not run; other errors do not.
TEST(RedisTopology, WhatASentElsewhereReplyIs) {
  const auto error = [](std::string text) {
    Value value;
    value.type = Value::Type::error;
    value.text = std::move(text);
    return value;
  };
  EXPECT_TRUE(Topology::sent_elsewhere(error("MOVED 3999 127.0.0.1:6381")));
  EXPECT_TRUE(Topology::sent_elsewhere(error("ASK 3999 127.0.0.1:6381")));
  EXPECT_TRUE(Topology::sent_elsewhere(error("CLUSTERDOWN The cluster is down")));
  EXPECT_TRUE(Topology::sent_elsewhere(error("TRYAGAIN Multiple keys request")));
  EXPECT_FALSE(Topology::sent_elsewhere(error("NOSCRIPT No matching script")));
  EXPECT_FALSE(Topology::sent_elsewhere(error("ERR MOVED")));
  Value status;
  status.type = Value::Type::status;
  status.text = "MOVED 3999 127.0.0.1:6381";
  EXPECT_FALSE(Topology::sent_elsewhere(status));
}

}  // namespace
}  // namespace ratelimit::stores::redis
