// The classic token bucket (start full, pay first) and each flag alone, on a fake clock. Expected
// values are worked out from the behaviour golang.org/x/time/rate documents for its Limiter
// (starts full, refills continuously, a reservation waits until its tokens exist and a refused one
// takes nothing), where the two agree; the comments say where they do not.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/limiter_waits.hpp"
#include "fake_clock.hpp"
#include "ratelimit/rate_limiter.hpp"
#include "thrown.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using namespace testing;  // the fake clock and acquire_each

BucketParams bursty(double rate, double burst_seconds, bool start_full, bool pay_first) {
  BucketParams params;
  params.permits_per_second = rate;
  params.max_burst_seconds = burst_seconds;
  params.start_full = start_full;
  params.pay_first = pay_first;
  return params;
}

// Which of `count` requests `interval` apart try_acquire grants (1-based).
std::vector<int> granted_tries(RateLimiter& limiter, FakeClock& clock, int count,
                               nanoseconds interval) {
  std::vector<int> granted;
  for (int request = 1; request <= count; ++request) {
    if (limiter.try_acquire()) granted.push_back(request);
    clock.advance(interval);
  }
  return granted;
}

// The textbook scenario: capacity 5, refilled at 3/s, a request every 100 ms, allowRequest().
// Stored after each: 4, 3.3, 2.6, 1.9, 1.2, 0.5; then 0.8 is short, 1.1 is enough, 0.4 and 0.7
// are short again.
TEST(Classic, TextbookScenarioRefillsContinuously) {
  FakeClock clock;
  auto limiter = RateLimiter::classic(3.0, 5.0, clock);
  EXPECT_EQ(granted_tries(limiter, clock, 10, 100ms), (std::vector<int>{1, 2, 3, 4, 5, 6, 8}));
}

// Guava's pay-later grants the request that finds 0.8 stored and books the missing 0.2 for the
// next caller, so the same loop on a full bucket without pay_first lets 7 through, and 8 too
// (0.1 stored, granted because the previous debt was paid).
TEST(Classic, TextbookScenarioWithoutPayFirstGrantsOnDebt) {
  FakeClock clock;
  RateLimiter limiter(bursty(3.0, 5.0 / 3.0, true, false), clock);
  EXPECT_EQ(granted_tries(limiter, clock, 10, 100ms), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(Classic, StartsFullThenRefillsContinuously) {
  FakeClock clock;
  auto limiter = RateLimiter::classic(2.0, 4.0, clock);
  EXPECT_EQ(acquire_each(limiter, 4), (Waits{0s, 0s, 0s, 0s}));
  EXPECT_FALSE(limiter.try_acquire());
  clock.advance(499ms);
  EXPECT_FALSE(limiter.try_acquire());
  clock.advance(1ms);
  EXPECT_TRUE(limiter.try_acquire());
  EXPECT_FALSE(limiter.try_acquire());
}

TEST(Classic, IdleRefillIsCappedAtTheCapacity) {
  FakeClock clock;
  auto limiter = RateLimiter::classic(3.0, 5.0, clock);
  EXPECT_TRUE(limiter.try_acquire(5));
  clock.advance(1h);
  EXPECT_FALSE(limiter.try_acquire(6));
  EXPECT_TRUE(limiter.try_acquire(5));
  EXPECT_FALSE(limiter.try_acquire());
}

TEST(Classic, TimeoutIsTheTimeUntilThePermitsExist) {
  FakeClock clock;
  auto limiter = RateLimiter::classic(4.0, 1.0, clock);
  EXPECT_TRUE(limiter.try_acquire(1, 0s));
  EXPECT_FALSE(limiter.try_acquire(1, 249ms));
  EXPECT_TRUE(limiter.try_acquire(1, 250ms));   // sleeps until its permit exists
  EXPECT_FALSE(limiter.try_acquire(1, 249ms));  // and left nothing stored
  EXPECT_EQ(clock.take_sleeps(), (Waits{0s, 250ms}));
}

// x/time/rate refuses any request above the burst; here it waits for the missing permits, and
// only a try (or a timeout too short for them) refuses it.
TEST(Classic, PermitsAboveTheCapacityWaitForTheMissingOnes) {
  constexpr nanoseconds kOneThird{333'333'333};
  FakeClock clock;
  auto limiter = RateLimiter::classic(3.0, 5.0, clock);
  EXPECT_FALSE(limiter.try_acquire(6));
  EXPECT_FALSE(limiter.try_acquire(6, 333ms));
  EXPECT_TRUE(limiter.try_acquire(6, 334ms));
  EXPECT_EQ(clock.take_sleeps(), (Waits{kOneThird}));
  EXPECT_EQ(limiter.acquire(7), 2'333'333'333ns);  // nothing stored now: all seven are fresh
  EXPECT_EQ(limiter.acquire(1), kOneThird);
}

TEST(Classic, RefusedRequestsTakeNothing) {
  FakeClock clock;
  auto limiter = RateLimiter::classic(1.0, 1.0, clock);
  EXPECT_TRUE(limiter.try_acquire());
  for (int i = 0; i < 9; ++i) {
    clock.advance(100ms);
    EXPECT_FALSE(limiter.try_acquire());
  }
  clock.advance(100ms);
  EXPECT_TRUE(limiter.try_acquire());
}

TEST(Classic, SetRateKeepsTheBurstTimeAndRescalesStoredPermits) {
  FakeClock clock;
  auto limiter = RateLimiter::classic(2.0, 4.0, clock);  // a burst of 2 s
  EXPECT_EQ(limiter.acquire(4), 0s);
  clock.advance(1s);      // 2 of 4 stored
  limiter.set_rate(4.0);  // 8 at most now, so the 2 stored become 4
  EXPECT_EQ(acquire_each(limiter, 5), (Waits{0s, 0s, 0s, 0s, 250ms}));
  EXPECT_EQ(limiter.rate(), 4.0);
}

// Over any window, at most the capacity plus rate * window permits are used, whatever the
// requests' weights (up to the capacity) and arrival times; Guava's pay-later exceeds this by
// the request it grants on debt.
TEST(Classic, NeverMoreThanTheCapacityPlusTheRefillOverAnyWindow) {
  constexpr double kRate = 10.0;
  constexpr double kCapacity = 5.0;
  struct Use {
    nanoseconds at;
    int permits;
  };
  auto worst_excess = [&](RateLimiter& limiter, FakeClock& clock, unsigned seed) {
    std::mt19937 random(seed);
    std::vector<Use> uses;
    for (int i = 0; i < 300; ++i) {
      clock.advance(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(random)));
      const int permits = std::uniform_int_distribution<int>(1, 5)(random);
      const bool try_only = std::uniform_int_distribution<int>(0, 1)(random) == 1;
      if (try_only ? limiter.try_acquire(permits) : (limiter.acquire(permits), true))
        uses.push_back({clock.now(), permits});
    }
    double worst = 0.0;
    for (std::size_t first = 0; first < uses.size(); ++first) {
      double used = 0.0;
      for (std::size_t last = first; last < uses.size(); ++last) {
        used += uses[last].permits;
        const double window_s =
            std::chrono::duration<double>(uses[last].at - uses[first].at).count();
        worst = std::max(worst, used - (kCapacity + kRate * window_s));
      }
    }
    return worst;
  };
  for (unsigned seed = 1; seed <= 5; ++seed) {
    FakeClock classic_clock;
    auto classic = RateLimiter::classic(kRate, kCapacity, classic_clock);
    EXPECT_LE(worst_excess(classic, classic_clock, seed), 1e-5) << "seed " << seed;
    FakeClock guava_clock;
    RateLimiter guava(bursty(kRate, kCapacity / kRate, true, false), guava_clock);
    EXPECT_GT(worst_excess(guava, guava_clock, seed), 0.5) << "seed " << seed;
  }
}

TEST(Classic, InfiniteRateNeverWaits) {
  FakeClock clock;
  auto limiter = RateLimiter::classic(std::numeric_limits<double>::infinity(), 5.0, clock);
  EXPECT_TRUE(limiter.try_acquire(std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(limiter.acquire(1000), 0s);
}

// Guava grants the first request at any rate; paying first, a permit that takes longer than the
// clock can count is never granted.
TEST(Classic, SmallestRateGrantsNothingBeyondTheCapacity) {
  FakeClock clock;
  auto limiter = RateLimiter::classic(std::numeric_limits<double>::denorm_min(), 0.0, clock);
  EXPECT_FALSE(limiter.try_acquire(1, 1000h));
  EXPECT_EQ(limiter.reserve(), nanoseconds::max() - clock.now());  // saturated, not wrapped
}

TEST(Classic, RejectsBadArgumentsNamingTheValue) {
  FakeClock clock;
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { RateLimiter::classic(3.0, -1.0, clock); }),
            "capacity must be finite and not negative, got -1");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] {
              RateLimiter::classic(3.0, std::numeric_limits<double>::quiet_NaN(), clock);
            }),
            "capacity must be finite and not negative, got nan");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { RateLimiter::classic(0.0, 5.0, clock); }),
            "rate must be positive, got 0");
  EXPECT_EQ(message_thrown<std::invalid_argument>(
                [&] { RateLimiter::classic(3.0, 5.0, clock).acquire(0); }),
            "permits must be positive, got 0");
}

// pay_first alone: an empty bucket, as Guava's, but every request waits for its own permits.
TEST(PayFirst, EachRequestWaitsForItsOwnPermits) {
  FakeClock clock;
  RateLimiter limiter(bursty(5.0, 1.0, false, true), clock);
  EXPECT_EQ(acquire_each(limiter, 3), (Waits{200ms, 200ms, 200ms}));
}

TEST(PayFirst, WeightsDelayTheirOwnCall) {
  FakeClock clock;
  RateLimiter limiter(bursty(1.0, 1.0, false, true), clock);
  for (int permits : {1, 1, 2, 4, 8, 1}) limiter.acquire(permits);
  EXPECT_EQ(clock.take_sleeps(), (Waits{1s, 1s, 2s, 4s, 8s, 1s}));  // Guava: 0, 1, 1, 2, 4, 8
}

TEST(PayFirst, IdleTimeStoresPermitsUpToTheBurst) {
  FakeClock clock;
  RateLimiter limiter(bursty(5.0, 1.0, false, true), clock);
  clock.advance(400ms);
  EXPECT_EQ(acquire_each(limiter, 3), (Waits{0s, 0s, 200ms}));
  clock.advance(10s);
  EXPECT_EQ(limiter.acquire(5), 0s);
  EXPECT_EQ(limiter.acquire(1), 200ms);
}

// With warm-up, a request waits its own cost: the first one on a cold bucket pays the coldest
// permit instead of going at once. Rate 2/s, warm-up 4 s: see kColdStartAt2PerSecond in
// rate_limiter_test.cpp, here shifted one request earlier.
TEST(PayFirst, WarmingUpRequestsPayTheirOwnColdCost) {
  FakeClock clock;
  BucketParams params;
  params.shape = BucketShape::warming_up;
  params.permits_per_second = 2.0;
  params.warmup = 4s;
  params.pay_first = true;
  RateLimiter limiter(params, clock);
  EXPECT_EQ(acquire_each(limiter, 6), (Waits{1375ms, 1125ms, 875ms, 625ms, 500ms, 500ms}));
  EXPECT_FALSE(limiter.try_acquire(1, 499ms));
  EXPECT_TRUE(limiter.try_acquire(1, 500ms));
}

// start_full alone: Guava's pay-later on a bucket that starts with its burst, so the request
// after the burst still goes at once and the one after it pays.
TEST(StartFull, TheBurstThenOneOnDebtGoAtOnce) {
  FakeClock clock;
  RateLimiter limiter(bursty(3.0, 5.0 / 3.0, true, false), clock);
  EXPECT_EQ(acquire_each(limiter, 7), (Waits{0s, 0s, 0s, 0s, 0s, 0s, 333'333'333ns}));
}

TEST(StartFull, IsRefusedWithWarmUp) {
  FakeClock clock;
  BucketParams params;
  params.shape = BucketShape::warming_up;
  params.warmup = 1s;
  params.start_full = true;
  EXPECT_THROW(RateLimiter(params, clock), std::invalid_argument);
}

}  // namespace
}  // namespace ratelimit
