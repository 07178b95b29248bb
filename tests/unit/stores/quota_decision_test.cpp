#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "ratelimit/quota.hpp"
#include "stores/bucket_store.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;

// The step every store takes under its lock: a refused request takes nothing from the rate or
// any quota, and waits for the later of their moments.
TEST(QuotaDecision, RefusedTakesNothingFromAnyOfThem) {
  stores::PermitRequest request;
  request.key = "api";
  request.params.permits_per_second = 10.0;
  request.quotas = {{.limit = 3, .period = 1h}, {.limit = 100, .period = 24h}};
  TokenBucket bucket(request.params, 0s);
  stores::KeySchedule schedule;
  std::vector<Quota> quotas;
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(stores::decide(bucket, schedule, quotas, request, 0s).granted);
  ASSERT_EQ(quotas.size(), 2u);
  const TokenBucket bucket_before = bucket;
  const std::vector<Quota> quotas_before = quotas;
  request.deadline = 1s;  // --timeout 1s
  const stores::Reservation refused = stores::decide(bucket, schedule, quotas, request, 0s);
  EXPECT_FALSE(refused.granted);
  EXPECT_GT(refused.wait, 59min);
  EXPECT_EQ(bucket.state(), bucket_before.state());
  EXPECT_EQ(quotas[0].state(), quotas_before[0].state());
  EXPECT_EQ(quotas[1].state(), quotas_before[1].state());
}

// A pipe's --stop-at-quota: a wait that a quota sets is refused, taking nothing, whatever the
// deadline; one the rate sets is granted.
TEST(QuotaDecision, AQuotaWaitRefusedTakesNothing) {
  stores::PermitRequest request;
  request.params.permits_per_second = 10.0;
  request.quotas = {{.limit = 3, .period = 1h}};
  request.refuse_quota_wait = true;
  TokenBucket bucket(request.params, 0s);
  stores::KeySchedule schedule;
  std::vector<Quota> quotas;
  for (int i = 0; i < 3; ++i) {
    const stores::Reservation granted = stores::decide(bucket, schedule, quotas, request, 0s);
    EXPECT_TRUE(granted.granted) << i;
    EXPECT_FALSE(granted.held_by_quota) << i;
  }
  const TokenBucket bucket_before = bucket;
  const std::vector<Quota> quotas_before = quotas;
  const stores::Reservation refused = stores::decide(bucket, schedule, quotas, request, 0s);
  EXPECT_FALSE(refused.granted);
  EXPECT_TRUE(refused.held_by_quota);
  EXPECT_GT(refused.wait, 59min);
  EXPECT_EQ(bucket.state(), bucket_before.state());
  EXPECT_EQ(quotas[0].state(), quotas_before[0].state());
}

TEST(QuotaDecision, ACallersQuotasReplaceTheKeysAndKeepCountsOfTheSamePeriod) {
  stores::PermitRequest request;
  request.params.permits_per_second = std::numeric_limits<double>::infinity();
  request.quotas = {{.limit = 3, .period = 1h}};
  TokenBucket bucket(request.params, 0s);
  stores::KeySchedule schedule;
  std::vector<Quota> quotas;
  stores::decide(bucket, schedule, quotas, request, 0s);
  stores::decide(bucket, schedule, quotas, request, 0s);
  request.quotas = {{.limit = 4, .period = 1h}, {.limit = 10, .period = 1s}};
  const stores::Reservation replaced = stores::decide(bucket, schedule, quotas, request, 0s);
  EXPECT_TRUE(replaced.granted);
  ASSERT_EQ(replaced.replaced_quotas.size(), 1u);
  EXPECT_EQ(replaced.replaced_quotas[0].limit, 3);
  EXPECT_EQ(quotas[0].used(0s), 3);  // the hour's two and this one
  EXPECT_EQ(quotas[1].used(0s), 1);
  request.apply_params = false;
  request.quotas.clear();  // a user that keeps the key's: the key's quotas hold
  EXPECT_TRUE(stores::decide(bucket, schedule, quotas, request, 0s).granted);
  EXPECT_EQ(quotas[0].used(0s), 4);
  request.deadline = 0s;  // --try
  EXPECT_FALSE(stores::decide(bucket, schedule, quotas, request, 0s).granted);
}

// A key without a rate whose quota holds a request keeps its next free moment at now: a store
// takes a later one on a bucket of no limit for a damaged record.
TEST(QuotaDecision, WithoutARateTheQuotaMovesNoTurn) {
  stores::PermitRequest request;
  request.params.permits_per_second = std::numeric_limits<double>::infinity();
  request.quotas = {{.limit = 1, .period = 1h}};
  TokenBucket bucket(request.params, 0s);
  stores::KeySchedule schedule;
  std::vector<Quota> quotas;
  stores::decide(bucket, schedule, quotas, request, 0s);
  const stores::Reservation held = stores::decide(bucket, schedule, quotas, request, 1s);
  EXPECT_TRUE(held.granted);
  EXPECT_GT(held.wait, 59min);
  EXPECT_LE(bucket.state().next_free, 1s);
}

}  // namespace
}  // namespace ratelimit
