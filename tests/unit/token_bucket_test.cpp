#include "ratelimit/token_bucket.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace ratelimit {
namespace {

using namespace std::chrono_literals;

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

TEST(TokenBucket, CanAcquireSaturatesAtTheTimeLimits) {
  TokenBucket bucket(bursty(1.0), std::chrono::nanoseconds::min());
  bucket.reserve(1, std::chrono::nanoseconds::min());
  EXPECT_TRUE(bucket.can_acquire(std::chrono::nanoseconds::min(), std::chrono::nanoseconds::max()));
  EXPECT_FALSE(bucket.can_acquire(std::chrono::nanoseconds::min(), 0s));
}

}  // namespace
}  // namespace ratelimit
