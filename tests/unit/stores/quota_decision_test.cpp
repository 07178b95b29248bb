#include <gtest/gtest.h>

#include <initializer_list>
#include <limits>
#include <vector>

#include "ratelimit/quota.hpp"
#include "stores/bucket_store.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;

// A key as a store holds it under its lock: its bucket, timetable and quotas, decided on at
// moments the test passes in.
struct Key {
  stores::PermitRequest request;
  TokenBucket bucket;
  stores::KeySchedule schedule;
  std::vector<Quota> quotas;

  Key(double permits_per_second, std::initializer_list<QuotaParams> quota_params)
      : request(request_of(permits_per_second, quota_params)), bucket(request.params, 0s) {}

  stores::Reservation decide(std::chrono::nanoseconds now = 0s) {
    return stores::decide(bucket, schedule, quotas, request, now);
  }

 private:
  static stores::PermitRequest request_of(double permits_per_second,
                                          std::initializer_list<QuotaParams> quota_params) {
    stores::PermitRequest request;
    request.key = "api";
    request.params.permits_per_second = permits_per_second;
    request.quotas = quota_params;
    return request;
  }
};

constexpr double kNoRate = std::numeric_limits<double>::infinity();

// The step every store takes under its lock: a refused request takes nothing from the rate or
// any quota, and waits for the later of their moments.
TEST(QuotaDecision, RefusedTakesNothingFromAnyOfThem) {
  Key key(10.0, {{.limit = 3, .period = 1h}, {.limit = 100, .period = 24h}});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(key.decide().granted);
  ASSERT_EQ(key.quotas.size(), 2u);
  const TokenBucket bucket_before = key.bucket;
  const std::vector<Quota> quotas_before = key.quotas;
  key.request.deadline = 1s;  // --timeout 1s
  const stores::Reservation refused = key.decide();
  EXPECT_FALSE(refused.granted);
  EXPECT_GT(refused.wait, 59min);
  EXPECT_EQ(key.bucket.state(), bucket_before.state());
  EXPECT_EQ(key.quotas[0].state(), quotas_before[0].state());
  EXPECT_EQ(key.quotas[1].state(), quotas_before[1].state());
}

// A pipe's --stop-at-quota: a wait that a quota sets is refused, taking nothing, whatever the
// deadline; one the rate sets is granted.
TEST(QuotaDecision, AQuotaWaitRefusedTakesNothing) {
  Key key(10.0, {{.limit = 3, .period = 1h}});
  key.request.refuse_quota_wait = true;
  for (int i = 0; i < 3; ++i) {
    const stores::Reservation granted = key.decide();
    EXPECT_TRUE(granted.granted) << i;
    EXPECT_FALSE(granted.held_by_quota) << i;
  }
  const TokenBucket bucket_before = key.bucket;
  const std::vector<Quota> quotas_before = key.quotas;
  const stores::Reservation refused = key.decide();
  EXPECT_FALSE(refused.granted);
  EXPECT_TRUE(refused.held_by_quota);
  EXPECT_GT(refused.wait, 59min);
  EXPECT_EQ(key.bucket.state(), bucket_before.state());
  EXPECT_EQ(key.quotas[0].state(), quotas_before[0].state());
}

TEST(QuotaDecision, ACallersQuotasReplaceTheKeysAndKeepCountsOfTheSamePeriod) {
  Key key(kNoRate, {{.limit = 3, .period = 1h}});
  key.decide();
  key.decide();
  key.request.quotas = {{.limit = 4, .period = 1h}, {.limit = 10, .period = 1s}};
  const stores::Reservation replaced = key.decide();
  EXPECT_TRUE(replaced.granted);
  ASSERT_EQ(replaced.replaced_quotas.size(), 1u);
  EXPECT_EQ(replaced.replaced_quotas[0].limit, 3);
  EXPECT_EQ(key.quotas[0].used(0s), 3);  // the hour's two and this one
  EXPECT_EQ(key.quotas[1].used(0s), 1);
  key.request.apply_params = false;
  key.request.quotas.clear();  // a user that keeps the key's: the key's quotas hold
  EXPECT_TRUE(key.decide().granted);
  EXPECT_EQ(key.quotas[0].used(0s), 4);
  key.request.deadline = 0s;  // --try
  EXPECT_FALSE(key.decide().granted);
}

// A key without a rate whose quota holds a request keeps its next free moment at now: a store
// takes a later one on a bucket of no limit for a damaged record.
TEST(QuotaDecision, WithoutARateTheQuotaMovesNoTurn) {
  Key key(kNoRate, {{.limit = 1, .period = 1h}});
  key.decide();
  const stores::Reservation held = key.decide(1s);
  EXPECT_TRUE(held.granted);
  EXPECT_GT(held.wait, 59min);
  EXPECT_LE(key.bucket.state().next_free, 1s);
}

}  // namespace
}  // namespace ratelimit
