#include "stores/open_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "temp_dir.hpp"
#include "usage_error.hpp"

namespace ratelimit::stores {
namespace {

PermitRequest one_permit(const std::string& key) {
  PermitRequest request;
  request.key = key;
  request.params.permits_per_second = 1.0;
  return request;
}

TEST(OpenStore, WithoutAUrlTheStateDirectoryKeepsTheBuckets) {
  testing::TempDir state;
  StoresOptions options;
  options.local.directory = state.string();
  EXPECT_FALSE(names_shared_store(options));
  EXPECT_EQ(describe_store(options), state.string());
  testing::FakeClock clock;
  testing::FakeWaiter waiter(clock);
  EXPECT_TRUE(open_store(options)->reserve(one_permit("api"), waiter).granted);
  EXPECT_FALSE(std::filesystem::is_empty(state.path()));
}

// A URL names Redis, with its policy while Redis cannot answer; the password is never shown.
TEST(OpenStore, AUrlNamesRedisWithItsPolicy) {
  testing::TempDir state;
  StoresOptions options;
  options.local.directory = state.string();
  options.redis.settings.url = "unix://:hunter2@" + (state.path() / "no-server.sock").string();
  check_store_options(options);
  std::vector<std::string> warnings;
  options.warn = [&](const std::string& warning) { warnings.push_back(warning); };
  EXPECT_TRUE(names_shared_store(options));
  EXPECT_EQ(describe_store(options).find("hunter2"), std::string::npos);
  EXPECT_TRUE(describe_store(options).starts_with("Redis at unix://"));
  testing::FakeClock clock;
  testing::FakeWaiter waiter(clock);
  EXPECT_THROW(open_store(options)->reserve(one_permit("api"), waiter), StoreUnavailable);
  options.redis.on_unavailable.action = OnUnavailable::allow;
  EXPECT_TRUE(open_store(options)->reserve(one_permit("api"), waiter).granted);
  EXPECT_EQ(warnings.size(), 1u);
  // Nothing was kept in the state directory: Redis was the store, and it allowed.
  EXPECT_TRUE(std::filesystem::is_empty(state.path()));
}

TEST(OpenStore, EachStoresOptionsAreCheckedTogether) {
  StoresOptions options;
  check_store_options(options);
  options.redis.settings.tls.ca_file = "ca.pem";
  EXPECT_EQ(usage_error_of(check_store_options, options),
            "the --redis-tls-* options need a rediss:// URL (--redis or $RATELIMIT_REDIS)");
}

TEST(OpenStore, RequestsOfNoStoresFormHaveNoRoute) {
  EXPECT_EQ(agent_route("garbage"), "");
  EXPECT_EQ(agent_route(""), "");
}

}  // namespace
}  // namespace ratelimit::stores
