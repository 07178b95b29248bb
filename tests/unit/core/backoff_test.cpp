#include "ratelimit/backoff.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace ratelimit {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

constexpr double kConfigured = 20.0;

struct Key {
  BackoffState backoff;
  BucketState bucket;

  ThrottleOutcome throttle(nanoseconds now, nanoseconds sent_at, nanoseconds retry_after = 0s) {
    return record_throttle(backoff, bucket, kConfigured,
                           {.sent_at = sent_at, .retry_after = retry_after}, now);
  }
  double rate(nanoseconds now) const { return rate_in_force(backoff, kConfigured, now); }
};

// A 429 reported at `now`, of a request sent at `sent_at` with its Retry-After, and what it must
// do to the key's pause: whether it makes it longer, and where the pause ends after it.
struct Report {
  nanoseconds now;
  nanoseconds sent_at;
  nanoseconds retry_after;
  bool extends_pause;
  nanoseconds paused_until;
};

void expect_pauses(Key& key, const std::vector<Report>& reports) {
  for (const Report& report : reports) {
    SCOPED_TRACE(::testing::Message() << "the report at " << report.now.count() << " ns, sent at "
                                      << report.sent_at.count() << " ns");
    EXPECT_EQ(key.throttle(report.now, report.sent_at, report.retry_after).pause_extended,
              report.extends_pause);
    EXPECT_EQ(key.backoff.paused_until, report.paused_until);
  }
}

TEST(Backoff, NeverThrottledRunsAtTheConfiguredRate) {
  const Key key;
  EXPECT_EQ(key.rate(0s), kConfigured);
  EXPECT_EQ(key.rate(1000s), kConfigured);
}

TEST(Backoff, AThrottleCutsTheRateByTheFactor) {
  Key key;
  EXPECT_TRUE(key.throttle(10s, 9s).new_event);
  EXPECT_DOUBLE_EQ(key.rate(10s), kConfigured * kBackoffCut);
}

TEST(Backoff, ReportsOfRequestsSentBeforeTheCutDoNotCutAgain) {
  Key key;
  key.throttle(10s, 9s);
  // Five more hosts report 429s of the same burst: their requests left before the cut.
  for (int host = 0; host < 5; ++host) EXPECT_FALSE(key.throttle(10s + 200ms, 9500ms).new_event);
  EXPECT_NEAR(key.rate(10s), kConfigured * kBackoffCut, 1e-9);
  EXPECT_EQ(key.backoff.throttles, 6);
}

TEST(Backoff, ARequestSentAfterTheCutAndThrottledCutsAgain) {
  Key key;
  key.throttle(10s, 9s);
  const double after_first = key.rate(11s);
  EXPECT_TRUE(key.throttle(11s, 10s + 500ms).new_event);
  // Before the rate was back at its plateau: the plateau is lowered too (fast convergence).
  EXPECT_DOUBLE_EQ(key.backoff.rate_before_cut, after_first * kBackoffConvergence);
  EXPECT_DOUBLE_EQ(key.rate(11s), after_first * kBackoffConvergence * kBackoffCut);
}

TEST(Backoff, ACutAfterTheRecoveryKeepsTheRateInForceAsItsPlateau) {
  Key key;
  key.throttle(0s, 0s);  // 20 -> 10, back at 20 at K
  const nanoseconds later = kBackoffRecovery + 1s;
  EXPECT_TRUE(key.throttle(later, later - 500ms).new_event);
  EXPECT_DOUBLE_EQ(key.backoff.rate_before_cut, kConfigured);
  EXPECT_DOUBLE_EQ(key.rate(later), kConfigured * kBackoffCut);
}

TEST(Backoff, AHalvedCapacityIsMetWithinTwoCuts) {
  // A key back at 8/s when its service halves: two cuts 3 s apart (1 s of pause, 2 s of
  // recovery), as the benchmark's loops report them, leave the rate below 4/s for the first half
  // second after the second pause; a cut of 0.5 without fast convergence is above it by then,
  // and one of 0.7 from the start.
  Key key;
  constexpr double kBefore = 8.0;
  key.backoff = {.paused_until = -5s, .event_at = -5s, .rate_before_cut = kBefore, .throttles = 1};
  ASSERT_DOUBLE_EQ(key.rate(0s), kBefore);
  key.throttle(0s, -1s, 1s);
  key.throttle(3s, 2s, 1s);
  EXPECT_LT(key.rate(4s), kBefore / 2);
  EXPECT_LT(key.rate(4s + 500ms), kBefore / 2);
}

TEST(Backoff, RecoversAlongTheCubicCurveToTheRateThatFailedAtK) {
  Key key;
  key.throttle(0s, 0s);  // cut from 20 to 10
  EXPECT_NEAR(key.rate(kBackoffRecovery), kConfigured, 1e-9);
  // Concave below K: most of the way back in the first half.
  const double halfway = key.rate(kBackoffRecovery / 2);
  EXPECT_NEAR(halfway, kConfigured * (1 - (1 - kBackoffCut) * 0.125), 1e-9);
  // Never above the configured rate, however long after.
  EXPECT_EQ(key.rate(kBackoffRecovery * 3), kConfigured);
}

TEST(Backoff, ProbesAboveTheRateThatFailedSlowlyFirst) {
  Key key;
  key.throttle(0s, 0s);     // 20 -> 10
  key.throttle(1s, 500ms);  // a new event at 14.9 on the way back: its plateau 75 % of that
  const double failed = key.backoff.rate_before_cut;
  const nanoseconds k = 1s + kBackoffRecovery;
  EXPECT_NEAR(key.rate(k), failed, 1e-9);
  const double one_second_on = key.rate(k + 1s) - failed;
  const double two_seconds_on = key.rate(k + 2s) - failed;
  EXPECT_GT(one_second_on, 0.0);
  EXPECT_NEAR(two_seconds_on, 8 * one_second_on, 1e-9);  // cubic in the time past K
}

TEST(Backoff, RecoveryStartsWhenThePauseEnds) {
  Key key;
  key.throttle(0s, 0s, 3s);
  EXPECT_DOUBLE_EQ(key.rate(1s), kConfigured * kBackoffCut);
  EXPECT_DOUBLE_EQ(key.rate(3s), kConfigured * kBackoffCut);
  EXPECT_NEAR(key.rate(3s + kBackoffRecovery), kConfigured, 1e-9);
}

TEST(Backoff, NeverBelowTheFloor) {
  Key key;
  for (int event = 0; event < 40; ++event)
    key.throttle(nanoseconds(event * 1'000'000), nanoseconds(event * 1'000'000));
  EXPECT_DOUBLE_EQ(key.rate(40ms), kConfigured * kBackoffFloor);
}

TEST(Backoff, RetryAfterPausesTheKeyAndDropsStoredPermits) {
  Key key;
  key.bucket = {.stored_permits = 20.0, .next_free = 5s};
  expect_pauses(key, {{.now = 10s,
                       .sent_at = 9s,
                       .retry_after = 30s,
                       .extends_pause = true,
                       .paused_until = 40s}});
  EXPECT_EQ(key.bucket.next_free, 40s);
  EXPECT_EQ(key.bucket.stored_permits, 0.0);
}

TEST(Backoff, PausesDoNotAddUpTheLatestEndHolds) {
  Key key;
  key.throttle(10s, 9s, 30s);
  expect_pauses(key, {
                         // The same event reported by others: their Retry-Afters count from the
                         // event, not their report.
                         {.now = 12s,
                          .sent_at = 9s,
                          .retry_after = 30s,
                          .extends_pause = false,
                          .paused_until = 40s},
                         {.now = 13s,
                          .sent_at = 9s,
                          .retry_after = 10s,
                          .extends_pause = false,
                          .paused_until = 40s},
                         // One of them was told to wait longer: the latest end holds.
                         {.now = 14s,
                          .sent_at = 9s,
                          .retry_after = 45s,
                          .extends_pause = true,
                          .paused_until = 55s},
                     });
}

TEST(Backoff, AStaleReportDoesNotRestartAPauseThatEnded) {
  Key key;
  key.throttle(10s, 9s, 1s);
  // The event's pause ended at 11 s; an old 429 (sent at 9 s) reported at 12 s holds nobody back.
  expect_pauses(key, {{.now = 12s,
                       .sent_at = 9s,
                       .retry_after = 30s,
                       .extends_pause = false,
                       .paused_until = 11s}});
  EXPECT_FALSE(key.throttle(12s, 9s, 30s).new_event);
}

TEST(Backoff, ANewEventDuringAnotherPauseEndsAtTheLaterEnd) {
  Key key;
  key.throttle(10s, 9s, 30s);
  // A request granted before the report (booked at the pause's end) and throttled after it.
  EXPECT_TRUE(key.throttle(41s, 40s, 5s).new_event);
  EXPECT_EQ(key.backoff.paused_until, 46s);
}

TEST(Backoff, ABucketInForceIsHeldUntilThePauseEndsWithNoCredit) {
  Key key;
  BucketParams params;
  params.permits_per_second = kConfigured;
  key.throttle(10s, 10s, 3s);
  // A give-back or a rate set by hand moved the next free moment back into the pause.
  key.bucket = {.stored_permits = 20.0, .next_free = 11s};
  TokenBucket held = bucket_in_force(params, key.bucket, key.backoff, 12s);
  EXPECT_EQ(held.reserve(1, 12s), 1s);
  EXPECT_EQ(held.state().stored_permits, 0.0);
}

TEST(Backoff, ABucketInForceRunsAtTheRateInForce) {
  Key key;
  BucketParams params;
  params.permits_per_second = kConfigured;
  key.throttle(10s, 10s);
  TokenBucket slower = bucket_in_force(params, key.bucket, key.backoff, 10s);
  EXPECT_DOUBLE_EQ(slower.params().permits_per_second, kConfigured * kBackoffCut);
  slower.reserve(1, 10s);
  EXPECT_EQ(slower.reserve(1, 10s),
            nanoseconds(static_cast<std::int64_t>(1e9 / (kConfigured * kBackoffCut))));
}

TEST(Backoff, WithoutThrottlesTheBucketIsTheKeys) {
  BucketParams params;
  params.permits_per_second = kConfigured;
  const BucketState state{.stored_permits = 3.0, .next_free = 7s};
  const TokenBucket same = bucket_in_force(params, state, BackoffState{}, 100s);
  EXPECT_EQ(same.params(), params);
  EXPECT_EQ(same.state(), state);
}

TEST(Backoff, RefusesANegativeRetryAfterOrAReportFromTheFuture) {
  Key key;
  EXPECT_THROW(key.throttle(10s, 9s, -1s), std::invalid_argument);
  EXPECT_THROW(key.throttle(10s, 11s), std::invalid_argument);
}

TEST(Backoff, AnUnlimitedKeyOnlyPauses) {
  BackoffState backoff;
  BucketState bucket;
  const double unlimited = INFINITY;
  record_throttle(backoff, bucket, unlimited, {.sent_at = 0s, .retry_after = 2s}, 0s);
  EXPECT_EQ(rate_in_force(backoff, unlimited, 1s), unlimited);
  EXPECT_EQ(backoff.paused_until, 2s);
}

}  // namespace
}  // namespace ratelimit
