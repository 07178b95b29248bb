#include "ratelimit/quota.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "thrown.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

BucketParams no_rate() {
  BucketParams params;
  params.permits_per_second = std::numeric_limits<double>::infinity();
  return params;
}

struct Grant {
  nanoseconds at;
  std::int64_t units;
};

// Units granted in [start, start + period).
std::int64_t granted_in(const std::vector<Grant>& grants, nanoseconds start, nanoseconds period) {
  std::int64_t units = 0;
  for (const Grant& grant : grants)
    if (grant.at >= start && grant.at < start + period) units += grant.units;
  return units;
}

// The most units in any window of length `period`: the busiest window starts at a grant.
std::int64_t busiest_window(const std::vector<Grant>& grants, nanoseconds period) {
  std::int64_t most = 0;
  for (const Grant& grant : grants) most = std::max(most, granted_in(grants, grant.at, period));
  return most;
}

// The exact sliding-window rule: the first t >= from at which (t - period, t] holds at most
// limit - units. The count only falls at the moments a grant leaves the window.
nanoseconds exact_earliest(const std::vector<Grant>& grants, const QuotaParams& quota,
                           std::int64_t units, nanoseconds from) {
  std::vector<nanoseconds> candidates{from};
  for (const Grant& grant : grants)
    if (grant.at + quota.period > from) candidates.push_back(grant.at + quota.period);
  std::sort(candidates.begin(), candidates.end());
  for (const nanoseconds t : candidates)
    if (granted_in(grants, t - quota.period + 1ns, quota.period) + units <= quota.limit) return t;
  ADD_FAILURE() << "no moment allows " << units;
  return from;
}

TEST(Quota, TheNextUnitWaitsUntilTheFirstGrantLeavesTheWindow) {
  QuotaBucket bucket(TokenBucket(no_rate(), 1s), {Quota({.limit = 3, .period = 1s}, 1s)});
  EXPECT_EQ(bucket.reserve(2, 1s), 0ns);
  EXPECT_EQ(bucket.reserve(1, 1500ms), 0ns);
  // Slots of 15.625 ms: the grants at 1 s (slot 64) leave the slots s-65..s counted for slot s at
  // slot 130, 2.03125 s; the exact rule would allow them at 2 s, two slots earlier.
  EXPECT_EQ(bucket.wait_for(1, 1500ms), 531250us);
  EXPECT_EQ(bucket.reserve(2, 1500ms), 531250us);
  // Full again until the grant at 1.5 s (slot 96) leaves, at slot 162.
  EXPECT_EQ(bucket.wait_for(1, 2s), 531250us);
}

TEST(Quota, MoreThanTheLimitIsNeverGranted) {
  QuotaBucket bucket(TokenBucket(no_rate(), 0s), {Quota({.limit = 3, .period = 1s}, 0s)});
  EXPECT_EQ(bucket.wait_for(4, 0s), nanoseconds::max());
  EXPECT_EQ(bucket.reserve(4, 0s), nanoseconds::max());
  EXPECT_EQ(bucket.quotas()[0].used(0s), 0);
}

TEST(Quota, TheRateAndTheQuotaTheLaterMomentWins) {
  BucketParams rate;
  rate.permits_per_second = 10.0;
  rate.pay_first = true;
  QuotaBucket bucket(TokenBucket(rate, 0s), {Quota({.limit = 5, .period = 10s}, 0s)});
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(bucket.reserve(1, 0s), i * 100ms);  // the rate holds
  EXPECT_TRUE(bucket.held_by_quota(1, 0s));
  // The quota: the first grant's slot (0 to 156.25 ms) is no longer counted from slot 66 on,
  // 10.3125 s.
  EXPECT_EQ(bucket.reserve(1, 0s), 10312500us);
  // The rate's turn moved with it: the next one waits its 100 ms after that, not at once from a
  // burst stored while the quota held.
  EXPECT_EQ(bucket.rate().wait_for(1, 10312500us), 100ms);
}

TEST(Quota, StateIsFixedSizeCountsOfSlots) {
  Quota quota({.limit = 100, .period = 64s}, 0s);  // slots of 1 s
  EXPECT_EQ(quota.slot_length(), 1s);
  quota.book(3, 0s);
  quota.book(4, 2500ms);
  EXPECT_EQ(quota.state().newest_slot, 2);
  EXPECT_EQ(quota.state().counts[kQuotaCounts - 3], 3);
  EXPECT_EQ(quota.state().counts[kQuotaCounts - 1], 4);
  EXPECT_EQ(quota.used(2s), 7);
  EXPECT_EQ(quota.used(65s), 7);  // slots 0..65 are counted for slot 65
  EXPECT_EQ(quota.used(66s), 4);
  Quota restored(quota.params(), quota.state());
  EXPECT_EQ(restored.earliest(95, 3s), quota.earliest(95, 3s));
}

// A booking a quota holds goes a window ahead and shifts the counts of the window ending now out
// of the state: used() still counts them (as passed) until the booking's slot, and never the
// bookings ahead.
TEST(Quota, UsedCountsTheWindowEndingNowWhileBookingsGoAhead) {
  Quota quota({.limit = 10, .period = 64s}, 0s);  // slots of 1 s
  quota.book(6, 0s);
  quota.book(4, 10s);
  quota.book(2, 66s, 20s);  // at 20 s, held until slot 0 has left the window
  EXPECT_EQ(quota.state().passed, 6);
  EXPECT_EQ(quota.used(20s), 10);
  quota.book(1, 67s, 21s);  // ahead again: what passed still counts
  EXPECT_EQ(quota.state().passed, 6);
  EXPECT_EQ(quota.used(21s), 10);
  // The 6 passed have left the window by 66 s, which passed alone does not tell: at most the limit.
  EXPECT_EQ(quota.used(66s), 10);
  EXPECT_EQ(quota.used(75s), 7);  // slots 10..75
  EXPECT_EQ(quota.used(76s), 3);
  quota.book(1, 80s, 80s);  // not ahead: nothing passed
  EXPECT_EQ(quota.state().passed, 0);
  EXPECT_EQ(quota.used(80s), 4);
  Quota restored(quota.params(), quota.state());
  EXPECT_EQ(restored.state(), quota.state());
}

TEST(Quota, SlotsAreWholeMicrosecondsCoveringThePeriod) {
  EXPECT_EQ(Quota({.limit = 1, .period = 1s}, 0s).slot_length(), 15625us);
  EXPECT_EQ(Quota({.limit = 1, .period = 1000us}, 0s).slot_length(), 16us);  // 15.625 up
  EXPECT_EQ(Quota({.limit = 1, .period = 1us}, 0s).slot_length(), 1us);
}

TEST(Quota, BadParametersNameTheValue) {
  EXPECT_THROW(Quota({.limit = 0, .period = 1s}, 0s), std::invalid_argument);
  EXPECT_THROW(Quota({.limit = kLargestExactCount + 1, .period = 1s}, 0s), std::invalid_argument);
  EXPECT_THROW(Quota({.limit = 1, .period = 999ns}, 0s), std::invalid_argument);
  EXPECT_NE(message_thrown<std::invalid_argument>([] {
              Quota({.limit = -5, .period = 1s}, 0s);
            }).find("-5"),
            std::string::npos);
}

// Random request streams against a rate and several quotas: no window of any quota ever holds more
// than its limit, even a slot longer than the period, and every grant comes at the earliest moment
// the rate and the windows allow, give or take two slots (plus the microseconds by which K slots
// overshoot the period).
TEST(Quota, BruteForceExactInEveryWindowAndNeverLaterThanASlot) {
  std::mt19937_64 random(29);
  for (int stream = 0; stream < 300; ++stream) {
    BucketParams rate;
    const int kind = static_cast<int>(random() % 3);
    rate.permits_per_second =
        kind == 0 ? std::numeric_limits<double>::infinity() : 1.0 + double(random() % 400);
    rate.max_burst_seconds = double(random() % 3);
    rate.pay_first = kind == 2;
    std::vector<QuotaParams> params;
    const int quota_count = 1 + static_cast<int>(random() % 4);
    for (int q = 0; q < quota_count; ++q)
      params.push_back({.limit = 1 + static_cast<std::int64_t>(random() % 40),
                        .period = nanoseconds(1'000'000 + random() % 3'000'000'000)});
    nanoseconds now = nanoseconds(random() % 1'000'000'000'000);
    std::vector<Quota> quotas;
    for (const QuotaParams& quota : params) quotas.emplace_back(quota, now);
    QuotaBucket bucket(TokenBucket(rate, now), quotas);
    std::int64_t smallest_limit = params[0].limit;
    for (const QuotaParams& quota : params) smallest_limit = std::min(smallest_limit, quota.limit);

    std::vector<Grant> grants;
    for (int request = 0; request < 150; ++request) {
      now += nanoseconds(random() % (random() % 2 ? 400'000'000 : 20'000'000));
      const std::int64_t units = 1 + static_cast<std::int64_t>(random() % smallest_limit);
      const nanoseconds rate_go = now + bucket.rate().wait_for(units, now);
      const nanoseconds wait = bucket.wait_for(units, now);
      ASSERT_EQ(bucket.reserve(units, now), wait);
      const nanoseconds go = now + wait;
      ASSERT_GE(go, rate_go);
      // The rate's turns keep the grants in order; without a rate, a request may go before the
      // last grant, in its slot, where the exact rule below does not apply.
      if (!grants.empty() && kind != 0) {
        ASSERT_GE(go, grants.back().at) << "grants go in order";
      }
      if (!grants.empty() && rate_go < grants.back().at) {
        grants.push_back({go, units});
        continue;
      }
      nanoseconds exact = rate_go;
      nanoseconds latest = rate_go;
      for (std::size_t q = 0; q < params.size(); ++q) {
        const nanoseconds allowed = exact_earliest(grants, params[q], units, rate_go);
        const nanoseconds slot = bucket.quotas()[q].slot_length();
        exact = std::max(exact, allowed);
        latest = std::max(latest, allowed + 2 * slot + (slot * kQuotaSlots - params[q].period));
      }
      ASSERT_GE(go, exact) << "stream " << stream << " request " << request;
      ASSERT_LE(go, latest) << "stream " << stream << " request " << request;
      grants.push_back({go, units});
      // Waiting callers: some wait for their grant before the next request, some do not.
      if (random() % 2) now = go;
    }
    for (const Quota& quota : bucket.quotas())
      ASSERT_LE(busiest_window(grants, quota.params().period + quota.slot_length()),
                quota.params().limit)
          << "stream " << stream;
  }
}

}  // namespace
}  // namespace ratelimit
