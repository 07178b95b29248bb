#include "ratelimit/token_bucket.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>

#include "thrown.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

BucketParams bursty(double rate, double burst_seconds = 1.0) {
  BucketParams params;
  params.permits_per_second = rate;
  params.max_burst_seconds = burst_seconds;
  return params;
}

TEST(TokenBucket, SavedStateReachesTheSameDecisions) {
  TokenBucket live(bursty(10.0), 0s);
  live.reserve(3, 0s);
  TokenBucket restored(live.params(), live.state());
  for (std::chrono::nanoseconds now : {100ms, 250ms, 2000ms, 2100ms}) {
    EXPECT_EQ(live.reserve(2, now), restored.reserve(2, now));
    EXPECT_EQ(live.state(), restored.state());
  }
}

TEST(TokenBucket, StateIsStoredPermitsAndNextFreeTime) {
  TokenBucket bucket(bursty(10.0), 5s);
  EXPECT_EQ(bucket.state(), (BucketState{0.0, 5s}));
  bucket.reserve(1, 5s);
  EXPECT_EQ(bucket.state(), (BucketState{0.0, 5100ms}));
  bucket.reserve(1, 7s);  // idle 1.9 s stores the 1 s cap of 10 permits, then spends one
  EXPECT_EQ(bucket.state(), (BucketState{9.0, 7s}));
  EXPECT_EQ(bucket.max_permits(), 10.0);
}

TEST(TokenBucket, ReconfigureRescalesStoredPermitsToTheNewBurst) {
  TokenBucket bucket(bursty(10.0, 1.0), 0s);
  bucket.reserve(1, 0s);
  bucket.reconfigure(bursty(10.0, 2.0), 10s);  // 10 stored of 10 become 20 of 20
  EXPECT_EQ(bucket.state().stored_permits, 20.0);
  EXPECT_EQ(bucket.reserve(20, 10s), 0ns);
  EXPECT_EQ(bucket.reserve(1, 10s), 0ns);
  EXPECT_EQ(bucket.reserve(1, 10s), 100ms);
}

TEST(TokenBucket, ReconfigureToWarmingUpFromAFullBurst) {
  TokenBucket bucket(bursty(2.0), 0s);
  bucket.reserve(1, 0s);
  BucketParams warming;
  warming.shape = BucketShape::warming_up;
  warming.permits_per_second = 2.0;
  warming.warmup = 4s;
  bucket.reconfigure(warming, 10s);  // 2 of 2 stored become 8 of 8: cold
  EXPECT_EQ(bucket.state().stored_permits, 8.0);
  bucket.reserve(1, 10s);
  EXPECT_EQ(bucket.reserve(1, 10s), 1375ms);
}

TEST(TokenBucket, RejectsACorruptState) {
  EXPECT_THROW(TokenBucket(bursty(1.0), BucketState{-1.0, 0s}), std::invalid_argument);
  EXPECT_THROW(TokenBucket(bursty(1.0), BucketState{std::numeric_limits<double>::quiet_NaN(), 0s}),
               std::invalid_argument);
}

TEST(TokenBucket, WaitForSaturatesAtTheTimeLimits) {
  TokenBucket bucket(bursty(1.0), std::chrono::nanoseconds::min());
  bucket.reserve(1, std::chrono::nanoseconds::min());
  EXPECT_EQ(bucket.wait_for(1, std::chrono::nanoseconds::min()), 1s);
  EXPECT_EQ(bucket.wait_for(1, std::chrono::nanoseconds::max()), 0s);
}

TEST(TokenBucket, WaitForIsWhatReserveWouldReturnAndBooksNothing) {
  for (bool pay_first : {false, true}) {
    BucketParams params = bursty(4.0);
    params.pay_first = pay_first;
    TokenBucket bucket(params, 0s);
    bucket.reserve(2, 0s);
    const BucketState before = bucket.state();
    const auto expected = bucket.wait_for(3, 100ms);
    EXPECT_EQ(bucket.state(), before);
    EXPECT_EQ(bucket.reserve(3, 100ms), expected);
    EXPECT_EQ(expected, pay_first ? 1150ms : 400ms);
  }
}

// The property the Redis script and the state file rely on: pay_first changes the wait returned,
// never the state, so one state serves callers that disagree about it.
TEST(TokenBucket, PayFirstChangesTheWaitNotTheState) {
  BucketParams warming;
  warming.shape = BucketShape::warming_up;
  warming.permits_per_second = 3.0;
  warming.warmup = 2s;
  std::mt19937 random(13);
  for (BucketParams params : {bursty(5.0, 2.0), warming}) {
    params.pay_first = false;
    TokenBucket later(params, 0s);
    params.pay_first = true;
    TokenBucket first(params, 0s);
    std::chrono::nanoseconds now = 0s;
    for (int i = 0; i < 200; ++i) {
      now += std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 900)(random));
      const std::int64_t permits = std::uniform_int_distribution<int>(1, 6)(random);
      const BucketState before = later.state();
      const auto paid_later = later.reserve(permits, now);
      const auto paid_first = first.reserve(permits, now);
      ASSERT_EQ(later.state(), first.state()) << "request " << i;
      // Guava's caller waits for the previous request's cost, the paying-first one for its own too.
      EXPECT_EQ(paid_later, std::max(before.next_free - now, 0ns));
      EXPECT_EQ(paid_first, first.state().next_free - now);
    }
  }
}

TEST(TokenBucket, StartFullFillsANewBucketOnly) {
  BucketParams params = bursty(3.0, 2.0);
  params.start_full = true;
  TokenBucket fresh(params, 5s);
  EXPECT_EQ(fresh.state(), (BucketState{6.0, 5s}));
  // A restored state is what was saved; a bucket reconfigured to start full is not refilled.
  EXPECT_EQ(TokenBucket(params, BucketState{1.0, 5s}).state(), (BucketState{1.0, 5s}));
  TokenBucket empty(bursty(3.0, 2.0), 5s);
  empty.reconfigure(params, 5s);
  EXPECT_EQ(empty.state(), (BucketState{0.0, 5s}));
}

TEST(TokenBucket, StartFullIsRefusedWithWarmUp) {
  BucketParams params;
  params.shape = BucketShape::warming_up;
  params.warmup = 1s;
  params.start_full = true;
  EXPECT_EQ(message_thrown<std::invalid_argument>([&] { validate(params); }),
            "start full applies to bursty buckets only: a warming-up bucket starts cold, full of "
            "slow permits");
}

}  // namespace
}  // namespace ratelimit
