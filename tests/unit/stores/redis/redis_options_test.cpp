#include "stores/redis/redis_options.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "usage_error.hpp"

namespace ratelimit::stores::redis {
namespace {

using namespace std::chrono_literals;

// `options` after the option `name` read `text` (a duration given as `duration` too).
void give(Options& options, std::string_view name, std::string_view text,
          std::chrono::nanoseconds duration = {}) {
  const auto all = store_options();
  const auto option = std::find_if(
      all.begin(), all.end(), [name](const auto& declared) { return declared.text.name == name; });
  ASSERT_NE(option, all.end()) << name;
  option->read(options, GivenValue{.text = text, .duration = duration});
}

TEST(RedisOptions, EveryOptionIsDeclaredOnceUnderItsName) {
  for (const std::string_view name :
       {kUrlOption, kTimeoutOption, kFailoverTimeoutOption, kTlsCaOption, kTlsCertOption,
        kTlsKeyOption, kTlsInsecureOption, kOnErrorOption}) {
    const auto all = store_options();
    EXPECT_EQ(std::count_if(all.begin(), all.end(),
                            [name](const auto& option) { return option.text.name == name; }),
              1)
        << name;
  }
}

TEST(RedisOptions, ValuesAreReadIntoTheirPlaces) {
  Options options;
  give(options, kUrlOption, "rediss://cache.lan");
  give(options, kTlsCaOption, "ca.pem");
  give(options, kTlsCertOption, "me.pem");
  give(options, kTlsKeyOption, "me.key");
  give(options, kTlsInsecureOption, "");
  check_options(options);
  EXPECT_EQ(options.settings.url.written, "rediss://cache.lan");
  EXPECT_EQ(options.settings.deployment.node.host, "cache.lan");
  EXPECT_EQ(options.settings.tls.ca_file, "ca.pem");
  EXPECT_EQ(options.settings.tls.cert_file, "me.pem");
  EXPECT_EQ(options.settings.tls.key_file, "me.key");
  EXPECT_FALSE(options.settings.tls.verify);
}

// The URL is parsed once all options are read: a bad one is refused then, its password hidden,
// whether or not the command goes on to open the store; an empty one is no Redis.
TEST(RedisOptions, ABadUrlIsRefusedOnceTheOptionsAreRead) {
  Options options;
  give(options, kUrlOption, "redis://:hunter2@cache.lan:0");
  EXPECT_EQ(usage_error_of(check_options, options),
            "bad Redis URL 'redis://:***@cache.lan:0': the port must be a number from 1 to 65535");
  give(options, kUrlOption, "redis-sentinel://s1:26379");
  EXPECT_EQ(
      usage_error_of(check_options, options).find("bad Redis URL 'redis-sentinel://s1:26379': "),
      0u);
  give(options, kUrlOption, "");
  EXPECT_EQ(usage_error_of(check_options, options), "accepted");
  EXPECT_EQ(options.settings.deployment.node.host, "");
}

// Timeouts are whole milliseconds, rounded up, and at least one.
TEST(RedisOptions, TimeoutsAreAtLeastAMillisecond) {
  Options options;
  give(options, kTimeoutOption, "1500us", 1500us);
  EXPECT_EQ(options.settings.timeout, 2ms);
  give(options, kFailoverTimeoutOption, "2m", 2min);
  EXPECT_EQ(options.settings.failover_timeout, 2min);
  EXPECT_EQ(usage_error_of(give, options, kTimeoutOption, "0s", 0s),
            "invalid duration '0s': must be at least 1ms");
  EXPECT_EQ(usage_error_of(give, options, kFailoverTimeoutOption, "999us", 999us),
            "invalid duration '999us': must be at least 1ms");
}

TEST(RedisOptions, WhatToDoWhileRedisCannotAnswer) {
  Options options;
  give(options, kOnErrorOption, "ALLOW");
  EXPECT_EQ(options.on_unavailable.action, OnUnavailable::allow);
  EXPECT_EQ(options.on_unavailable.said_as, "--on-redis-error=allow");
  give(options, kOnErrorOption, "local:25%");
  EXPECT_EQ(options.on_unavailable.action, OnUnavailable::local);
  EXPECT_EQ(options.on_unavailable.local_share, 0.25);
  give(options, kOnErrorOption, "local");
  EXPECT_EQ(options.on_unavailable.local_share, 1.0);
  for (const std::string_view share : {"local:0%", "local:101%", "local:25", "local:x%"})
    EXPECT_EQ(usage_error_of(give, options, kOnErrorOption, share, 0s),
              "invalid value '" + std::string(share) +
                  "': expected local:N% with N above 0 and at most 100 (this host's share of the "
                  "key's rate), e.g. local:25%");
  EXPECT_NE(usage_error_of(give, options, kOnErrorOption, "sometimes", 0s), "accepted");
}

TEST(RedisOptions, TlsOptionsNeedARedisUrl) {
  Options options;
  check_options(options);
  options.settings.tls.verify = false;
  EXPECT_EQ(usage_error_of(check_options, options),
            "the --redis-tls-* options need a rediss:// URL (--redis or $RATELIMIT_REDIS)");
  options.settings.url = "redis://:hunter2@cache.lan";
  EXPECT_EQ(usage_error_of(check_options, options),
            "the --redis-tls-* options need a rediss:// URL, not 'redis://:***@cache.lan'");
  options.settings.url = "rediss://cache.lan";
  EXPECT_EQ(usage_error_of(check_options, options), "accepted");
}

}  // namespace
}  // namespace ratelimit::stores::redis
