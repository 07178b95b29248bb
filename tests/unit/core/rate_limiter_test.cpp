// Guava 31's RateLimiterTest scenarios, replayed on a fake clock. Expected waits are worked out
// from the formulas in shared/design.md and asserted to the nanosecond where the arithmetic is
// exact in binary, otherwise to the microsecond.
#include "ratelimit/rate_limiter.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/limiter_waits.hpp"
#include "fake_clock.hpp"
#include "thrown.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using testing::acquire_each;
using testing::FakeClock;
using testing::Waits;

void expect_waits_near(const Waits& actual, const Waits& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(actual[i].count()), static_cast<double>(expected[i].count()),
                1000.0)
        << "acquire #" << i;
  }
}

// The waits of one acquire(1) and, `idle` later, of `after` more.
Waits acquire_then_after_idle(RateLimiter& limiter, FakeClock& clock, nanoseconds idle, int after) {
  Waits waits{limiter.acquire()};
  clock.advance(idle);
  for (const nanoseconds wait : acquire_each(limiter, after)) waits.push_back(wait);
  return waits;
}

// The sleeps of `count` acquire(1) calls after the rate is set to `rate`.
Waits sleeps_at_rate(RateLimiter& limiter, FakeClock& clock, double rate, int count) {
  limiter.set_rate(rate);
  acquire_each(limiter, count);
  return clock.take_sleeps();
}

TEST(Bursty, FirstAcquireIsFreeAndItsCostIsPaidByTheNext) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(5.0, clock);
  EXPECT_EQ(acquire_each(limiter, 3), (Waits{0ns, 200ms, 200ms}));
  EXPECT_EQ(clock.take_sleeps(), (Waits{0ns, 200ms, 200ms}));
}

TEST(Bursty, IdleTimeMakesTheNextRequestImmediate) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(5.0, clock);
  EXPECT_EQ(acquire_then_after_idle(limiter, clock, 200ms, 2), (Waits{0ns, 0ns, 200ms}));
}

TEST(Bursty, EarliestAvailableInThePastStoresPermits) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(5.0, clock);
  // 400 ms of idle time: 200 ms repay the first permit, 200 ms store one more.
  EXPECT_EQ(acquire_then_after_idle(limiter, clock, 400ms, 3), (Waits{0ns, 0ns, 0ns, 200ms}));
}

TEST(Bursty, IdleRefillIsCappedAtOneSecondOfPermits) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(5.0, clock);
  clock.advance(1s);  // five permits stored: the cap
  clock.advance(1s);  // makes no difference
  EXPECT_EQ(limiter.acquire(1), 0ns);
  EXPECT_EQ(limiter.acquire(1), 0ns);
  EXPECT_EQ(limiter.acquire(3), 0ns);
  EXPECT_EQ(limiter.acquire(1), 0ns);  // the fifth stored permit ends the burst
  EXPECT_EQ(limiter.acquire(), 200ms);
}

TEST(Bursty, CustomMaxBurstSeconds) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(10.0, clock, 0.5);
  clock.advance(10s);  // stores 0.5 s * 10/s = 5 permits, no more
  EXPECT_EQ(limiter.acquire(5), 0ns);
  EXPECT_EQ(limiter.acquire(1), 0ns);  // the burst was stored: this one is fresh, cost 100 ms
  EXPECT_EQ(limiter.acquire(1), 100ms);
}

TEST(Bursty, ZeroBurstStoresNothing) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(10.0, clock, 0.0);
  EXPECT_EQ(acquire_then_after_idle(limiter, clock, 5s, 2), (Waits{0ns, 0ns, 100ms}));
}

TEST(Bursty, WeightsDelayTheFollowingCall) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(1.0, clock);
  limiter.acquire(1);
  limiter.acquire(1);
  limiter.acquire(2);
  limiter.acquire(4);
  limiter.acquire(8);
  limiter.acquire(1);
  EXPECT_EQ(clock.take_sleeps(), (Waits{0s, 1s, 1s, 2s, 4s, 8s}));
}

TEST(Bursty, SetRateAppliesFromTheNextPermitOn) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(1.0, clock);
  limiter.acquire(1);
  limiter.acquire(1);
  limiter.set_rate(2.0);
  limiter.acquire(1);  // repays the permit taken at the old rate: 1 s
  limiter.acquire(2);  // 0.5 s, the new rate
  limiter.acquire(4);  // 1 s for the previous 2 permits
  limiter.acquire(1);  // 2 s for the previous 4
  EXPECT_EQ(clock.take_sleeps(), (Waits{0s, 1s, 1s, 500ms, 1s, 2s}));
  EXPECT_EQ(limiter.rate(), 2.0);
}

TEST(Bursty, SetRateRescalesStoredPermits) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(4.0, clock);
  clock.advance(500ms);   // 2 of at most 4 permits stored
  limiter.set_rate(8.0);  // the maximum doubles to 8, so the 2 stored become 4
  EXPECT_EQ(limiter.acquire(4), 0ns);
  EXPECT_EQ(limiter.acquire(1), 0ns);  // all four were stored: nothing to repay
  EXPECT_EQ(limiter.acquire(1), 125ms);
}

TEST(Bursty, NeverBurstsMoreThanOneSecondOfWorkAcrossRateChanges) {
  FakeClock clock;
  std::mt19937 random(42);
  auto total_time = [&](RateLimiter& limiter, int permits) {
    const nanoseconds start = clock.now();
    while (permits > 0) {
      const int chunk = std::max(1, std::uniform_int_distribution<int>(0, permits - 1)(random));
      permits -= chunk;
      limiter.acquire(chunk);
    }
    limiter.acquire(1);  // repays any pending debt
    return clock.now() - start;
  };
  auto limiter = RateLimiter::bursty(1.0, clock);
  for (int rate : {1000, 1, 10, 1000000, 10, 1}) {
    clock.advance(std::chrono::milliseconds(rate * 1000LL));
    limiter.set_rate(rate);
    EXPECT_LE(total_time(limiter, rate), 1s) << "stored burst at rate " << rate;
    EXPECT_GE(total_time(limiter, rate), 1s) << "after the burst at rate " << rate;
  }
}

// Rate 2/s, warm-up 4 s, cold factor 3: stable 0.5 s, cold 1.5 s, threshold 0.5*4/0.5 = 4 permits,
// max 4 + 2*4/(0.5+1.5) = 8 permits, slope (1.5-0.5)/(8-4) = 0.25 s per permit.
// From cold (8 stored) the first permit costs the area between 8 and 7 stored:
// (0.5+4*0.25 + 0.5+3*0.25)/2 = 1.375 s; then 1.125, 0.875, 0.625; below the threshold 0.5 s.
const Waits kColdStartAt2PerSecond = {0ms, 1375ms, 1125ms, 875ms, 625ms, 500ms, 500ms, 500ms};

TEST(WarmingUp, RampsDownFromColdAndCoolsAgainWhenIdle) {
  FakeClock clock;
  auto limiter = RateLimiter::warming_up(2.0, 4s, clock, 3.0);
  EXPECT_EQ(acquire_each(limiter, 8), kColdStartAt2PerSecond);
  clock.advance(500ms);  // repays the last acquire
  clock.advance(4s);     // cool-down interval 4 s / 8 permits: cold again
  EXPECT_EQ(acquire_each(limiter, 8), kColdStartAt2PerSecond);
  clock.advance(500ms);
  clock.advance(2s);  // refills only to the threshold: still warm
  EXPECT_EQ(acquire_each(limiter, 8),
            (Waits{0ms, 500ms, 500ms, 500ms, 500ms, 500ms, 500ms, 500ms}));
}

TEST(WarmingUp, ColdFactorTen) {
  // Rate 5/s, warm-up 4 s: stable 0.2 s, cold 2 s, threshold 10, max 10 + 8/2.2 = 10 + 40/11,
  // slope 1.8/(40/11) = 0.495 s. First cost: (0.4 + (80/11 - 1)*0.495)/2 = 1.7525 s.
  // The fourth takes the last 7/11 above the threshold and 4/11 below it:
  // 7/11*(0.4 + 7/11*0.495)/2 + 4/11*0.2 = 0.2275 + 0.0727... = 0.3002272 s.
  const Waits cold_start = {0ns, 1752500us, 1257500us, 762500us, 300227us, 200ms, 200ms, 200ms};
  FakeClock clock;
  auto limiter = RateLimiter::warming_up(5.0, 4s, clock, 10.0);
  expect_waits_near(acquire_each(limiter, 8), cold_start);
  clock.advance(200ms);
  clock.advance(4s);
  expect_waits_near(acquire_each(limiter, 8), cold_start);
  clock.advance(200ms);
  clock.advance(1s);  // still warm: going cold takes another 3 s
  expect_waits_near(acquire_each(limiter, 8),
                    Waits{0ms, 200ms, 200ms, 200ms, 200ms, 200ms, 200ms, 200ms});
}

TEST(WarmingUp, ColdFactorOneIsFlat) {
  FakeClock clock;
  auto limiter = RateLimiter::warming_up(5.0, 4s, clock, 1.0);
  const Waits flat = {0ms, 200ms, 200ms, 200ms, 200ms, 200ms, 200ms, 200ms};
  EXPECT_EQ(acquire_each(limiter, 8), flat);
  clock.advance(340ms);
  EXPECT_EQ(acquire_each(limiter, 8), flat);
}

TEST(WarmingUp, SetRateKeepsTheWarmUpTimeAndRescalesPermits) {
  FakeClock clock;
  auto limiter = RateLimiter::warming_up(2.0, 4s, clock, 3.0);
  EXPECT_EQ(acquire_each(limiter, 8), kColdStartAt2PerSecond);
  clock.advance(4500ms);  // cold again
  EXPECT_EQ(acquire_each(limiter, 3), (Waits{0ms, 1375ms, 1125ms}));
  // 5 of 8 permits stored. At 4/s: stable 0.25, cold 0.75, threshold 8, max 16, slope 0.0625;
  // the 5 stored become 10, two above the threshold.
  limiter.set_rate(4.0);
  EXPECT_EQ(limiter.acquire(), 875ms);  // the debt of the last acquire at the old rate
  // (0.25+2*0.0625 + 0.25+1*0.0625)/2 = 0.34375, then 0.28125, then the stable 0.25.
  EXPECT_EQ(acquire_each(limiter, 4), (Waits{343750us, 281250us, 250ms, 250ms}));
  clock.advance(4250ms);  // cold again: cool-down interval 4 s / 16 permits
  EXPECT_EQ(acquire_each(limiter, 11), (Waits{0ms, 718750us, 656250us, 593750us, 531250us, 468750us,
                                              406250us, 343750us, 281250us, 250ms, 250ms}));
}

// If a cold bucket is pushed max - threshold permits in any split, it takes exactly the warm-up
// period: (1 + cold_factor) * permits * stable / 2, the trapezoid's area.
TEST(WarmingUp, WarmUpTimeIsHonouredWhateverTheWeights) {
  std::mt19937 random(7);
  constexpr int kWarmupPermits = 10;
  for (int trial = 0; trial < 50; ++trial) {
    for (double cold_factor : {1.0, 2.0, 3.0, 10.0}) {
      for (double rate : {4.0, 2.0, 1.0, 0.5, 0.1}) {
        const auto warmup = std::chrono::milliseconds(
            static_cast<std::int64_t>((1 + cold_factor) * kWarmupPermits / (2.0 * rate) * 1000.0));
        FakeClock clock;
        auto limiter = RateLimiter::warming_up(rate, warmup, clock, cold_factor);
        const nanoseconds start = clock.now();
        int permits = kWarmupPermits;
        while (permits > 0) {
          const int chunk = std::max(1, std::uniform_int_distribution<int>(0, permits - 1)(random));
          permits -= chunk;
          limiter.acquire(chunk);
        }
        limiter.acquire(1);
        // Each acquire truncates its wait to whole nanoseconds, so allow one per acquire.
        EXPECT_NEAR(static_cast<double>((clock.now() - start).count()),
                    static_cast<double>(nanoseconds(warmup).count()), kWarmupPermits + 1.0)
            << "cold factor " << cold_factor << ", rate " << rate;
      }
    }
  }
}

TEST(WarmingUp, ZeroWarmUpBehavesAsAStrictlySmoothBucket) {
  FakeClock clock;
  auto limiter = RateLimiter::warming_up(10.0, 0s, clock);
  clock.advance(1s);
  EXPECT_EQ(acquire_each(limiter, 3), (Waits{0ms, 100ms, 100ms}));
}

// One try_acquire on a 5/s bursty limiter: `idle` on the fake clock before it, its permits and
// timeout, and whether it must be granted.
struct Try {
  nanoseconds idle;
  std::int64_t permits;
  nanoseconds timeout;
  bool granted;
};

// Runs `tries` in order on a new 5/s limiter, checking each; returns the limiter's sleeps.
Waits sleeps_of_tries(const std::vector<Try>& tries) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(5.0, clock);
  for (std::size_t i = 0; i < tries.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "try #" << i);
    clock.advance(tries[i].idle);
    EXPECT_EQ(limiter.try_acquire(tries[i].permits, tries[i].timeout), tries[i].granted);
  }
  return clock.take_sleeps();
}

TEST(TryAcquire, NoWaitAllowed) {
  sleeps_of_tries({
      {.idle = 0s, .permits = 1, .timeout = 0s, .granted = true},
      {.idle = 0s, .permits = 1, .timeout = 0s, .granted = false},
      {.idle = 0s, .permits = 1, .timeout = 0s, .granted = false},
      {.idle = 100ms, .permits = 1, .timeout = 0s, .granted = false},
  });
}

TEST(TryAcquire, SomeWaitAllowed) {
  EXPECT_EQ(sleeps_of_tries({
                {.idle = 0s, .permits = 1, .timeout = 0s, .granted = true},
                // Sleeps the 200 ms it was allowed.
                {.idle = 0s, .permits = 1, .timeout = 200ms, .granted = true},
                {.idle = 0s, .permits = 1, .timeout = 100ms, .granted = false},
                {.idle = 100ms, .permits = 1, .timeout = 100ms, .granted = true},
            }),
            (Waits{0ms, 200ms, 100ms}));
}

TEST(TryAcquire, MaximalTimeoutDoesNotOverflow) {
  sleeps_of_tries({
      {.idle = 0s, .permits = 1, .timeout = 0s, .granted = true},
      {.idle = 100ms, .permits = 1, .timeout = nanoseconds::max(), .granted = true},
  });
}

TEST(TryAcquire, NegativeTimeoutCountsAsZero) {
  sleeps_of_tries({
      {.idle = 0s, .permits = 5, .timeout = 0s, .granted = true},
      {.idle = 900ms, .permits = 1, .timeout = nanoseconds::min(), .granted = false},
      {.idle = 100ms, .permits = 1, .timeout = -1s, .granted = true},
  });
}

TEST(TryAcquire, FirstPermitIsImmediateOnTheSystemClock) {
  auto limiter = RateLimiter::bursty(1.0);
  EXPECT_TRUE(limiter.try_acquire());
  EXPECT_FALSE(limiter.try_acquire());
}

TEST(Reserve, BooksWithoutSleeping) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(10.0, clock);
  EXPECT_EQ(limiter.reserve(1), 0ns);
  EXPECT_EQ(limiter.reserve(1), 100ms);
  EXPECT_EQ(limiter.reserve(3), 200ms);
  EXPECT_EQ(limiter.reserve(1), 500ms);
  EXPECT_TRUE(clock.take_sleeps().empty());
}

TEST(Infinity, BurstyNeverWaitsAndKeepsAFullBurstWhenSlowed) {
  FakeClock clock;
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  auto limiter = RateLimiter::bursty(kInfinity, clock);
  limiter.acquire(std::numeric_limits<int>::max() / 4);
  limiter.acquire(std::numeric_limits<int>::max() / 2);
  limiter.acquire(std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(clock.take_sleeps(), (Waits{0s, 0s, 0s}));

  // A full burst of 2 stored, then the free request, then 0.5 s each.
  EXPECT_EQ(sleeps_at_rate(limiter, clock, 2.0, 5), (Waits{0s, 0s, 0s, 500ms, 500ms}));
  // Repays the last, then free.
  EXPECT_EQ(sleeps_at_rate(limiter, clock, kInfinity, 3), (Waits{500ms, 0s, 0s}));
}

TEST(Infinity, BurstyAfterTimeElapsed) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(std::numeric_limits<double>::infinity(), clock);
  clock.advance(1ms);
  EXPECT_EQ(sleeps_at_rate(limiter, clock, 2.0, 5), (Waits{0s, 0s, 0s, 500ms, 500ms}));
}

TEST(Infinity, WarmingUpIsWarmWhenSlowed) {
  FakeClock clock;
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  auto limiter = RateLimiter::warming_up(kInfinity, 10s, clock);
  limiter.acquire(std::numeric_limits<int>::max() / 4);
  limiter.acquire(std::numeric_limits<int>::max() / 2);
  limiter.acquire(std::numeric_limits<int>::max());
  EXPECT_EQ(clock.take_sleeps(), (Waits{0s, 0s, 0s}));

  EXPECT_EQ(sleeps_at_rate(limiter, clock, 1.0, 3), (Waits{0s, 1s, 1s}));
  EXPECT_EQ(sleeps_at_rate(limiter, clock, kInfinity, 3), (Waits{1s, 0s, 0s}));
}

TEST(Infinity, WarmingUpAfterTimeElapsed) {
  FakeClock clock;
  auto limiter = RateLimiter::warming_up(std::numeric_limits<double>::infinity(), 10s, clock);
  clock.advance(1ms);
  EXPECT_EQ(sleeps_at_rate(limiter, clock, 1.0, 5), (Waits{0s, 1s, 1s, 1s, 1s}));
}

TEST(Denormal, SmallestRateGrantsExactlyOnePermitEver) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(std::numeric_limits<double>::denorm_min(), clock);
  EXPECT_TRUE(limiter.try_acquire());
  EXPECT_FALSE(limiter.try_acquire());
  clock.advance(std::chrono::milliseconds(std::numeric_limits<int>::max()));
  EXPECT_FALSE(limiter.try_acquire());
  EXPECT_EQ(limiter.reserve(), nanoseconds::max() - clock.now());  // saturated, not wrapped
}

TEST(Denormal, SmallestRateWarmingUp) {
  FakeClock clock;
  auto limiter = RateLimiter::warming_up(std::numeric_limits<double>::denorm_min(), 10s, clock);
  EXPECT_TRUE(limiter.try_acquire());
  EXPECT_FALSE(limiter.try_acquire(1, 1000s));
}

TEST(Validation, RejectsBadArgumentsNamingTheValue) {
  FakeClock clock;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { RateLimiter::bursty(0.0, clock); }),
            "rate must be positive, got 0");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { RateLimiter::bursty(-1.5, clock); }),
            "rate must be positive, got -1.5");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { RateLimiter::bursty(nan, clock); }),
            "rate must be positive, got nan");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { RateLimiter::bursty(1.0, clock, -1.0); }),
            "max burst seconds must be finite and not negative, got -1");
  EXPECT_EQ(
      message_thrown<std::invalid_argument>([&] { RateLimiter::warming_up(1.0, -1ns, clock); }),
      "warm-up must not be negative, got -1ns");
  EXPECT_EQ(
      message_thrown<std::invalid_argument>([&] { RateLimiter::warming_up(1.0, 1s, clock, 0.5); }),
      "cold factor must be finite and at least 1, got 0.5");
  auto limiter = RateLimiter::bursty(1.0, clock);
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { limiter.acquire(0); }),
            "permits must be positive, got 0");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { limiter.reserve(-1); }),
            "permits must be positive, got -1");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { limiter.try_acquire(0, 1s); }),
            "permits must be positive, got 0");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { limiter.set_rate(0.0); }),
            "rate must be positive, got 0");
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { limiter.set_rate(nan); }),
            "rate must be positive, got nan");
  EXPECT_EQ(limiter.rate(), 1.0);  // a rejected set_rate changes nothing
  EXPECT_NO_THROW(RateLimiter::warming_up(1.0, 1ns, clock));
  EXPECT_NO_THROW(RateLimiter::warming_up(1.0, 0ns, clock));
}

TEST(Move, KeepsTheBucket) {
  FakeClock clock;
  auto limiter = RateLimiter::bursty(10.0, clock);
  limiter.acquire(5);
  RateLimiter moved(std::move(limiter));
  EXPECT_EQ(moved.reserve(), 500ms);
}

}  // namespace
}  // namespace ratelimit
