#pragma once

#include <chrono>
#include <cstdint>

#include "ratelimit/token_bucket.hpp"

namespace ratelimit {

// Backing off together: what a key keeps once a service said "too many" (HTTP 429, SlowDown...)
// to one of its users, so that every user of the key slows down. Plain data, time passed in, on
// the store's timeline, so that a state file or a Redis script keeps the same values and reaches
// the same decisions.
//
// Two things hold the key back:
// - a pause: nothing is granted before `paused_until`, and no credit builds up meanwhile;
// - a rate in force below the key's configured rate, cut by kBackoffCut on a throttle and
//   recovering along a CUBIC curve (below) back to the configured rate, never below
//   kBackoffFloor of it.
//
// Events. Several users hit by one burst of "too many" report it several times, from several
// hosts, some late. A report says when the request it is about was sent (`sent_at`): a request
// sent before the current event began was sent under the rate and pause that the event already
// answered, so its report belongs to that event: it does not cut the rate again, and its
// Retry-After counts from the event's start: it may lengthen the event's pause to the latest
// Retry-After reported, never add to it, and never start the pause again once it has ended (a
// late report of an old 429 holds nobody back). A request sent after the event began that is
// throttled again starts a new event: the rate in force was still too high. Pauses never add up:
// a pause ends at the latest end reported.
//
// The rate in force, t after requests resume from the last cut at W (the plateau: the rate in
// force just before it): t from the cut, or from the end of its pause, with K = kBackoffRecovery:
// W * (1 - (1 - kBackoffCut) * (1 - t / K)^3), for t < K: back at W at K, and beyond K the same
// curve rising above W (so it probes past the rate that failed, slowly first): min(configured,
// max(floor, that)). This is CUBIC (RFC 8312) with its scale chosen so that the time back to W is
// K whatever the rate: C = W * (1 - kBackoffCut) / K^3.
//
// The cut is 0.5, not TCP's 0.7: a cut is an event only once per epoch, and between events the
// curve (concave first) wins back most of it: 0.7 then recovering for the 1.5 to 2 s an event
// lasts against a 1 s Retry-After left the rate at 0.92 of the one cut, so a service whose
// capacity halved (8/s to 4/s) met a rate still above it 10 s later, at one 429 every 3 s
// (bench/results/backoff.md before this change: 6.7 % of 429s from 20 to 30 s).
inline constexpr double kBackoffCut = 0.5;
// A cut that comes before the rate is back at its plateau (within K of resuming) says that the
// service's capacity fell: the new plateau is the rate in force times kBackoffConvergence, the
// midpoint of the cut (RFC 8312's fast convergence), so the rate restarts at 0.375 of it and a
// halved capacity is reached in two events, not five. At a steady capacity a cut that comes
// after K keeps W; one that comes earlier lowers the plateau until the cuts come after K (at 8/s
// the key still uses over 90 % of the service's capacity).
inline constexpr double kBackoffConvergence = (1.0 + kBackoffCut) / 2.0;
// A cut never takes the rate in force below 1/100 of the configured rate (seven cuts in a row:
// 0.5^7 = 0.0078): a service that wants less says so with Retry-After, which pauses.
inline constexpr double kBackoffFloor = 0.01;
inline constexpr std::chrono::nanoseconds kBackoffRecovery = std::chrono::seconds(5);
// The longest pause one report may ask for unless its reporter says otherwise (--max-pause): a
// Retry-After of a day is more likely a mistake (or an HTTP date on a wrong clock) than a wish.
inline constexpr std::chrono::nanoseconds kDefaultMaxPause = std::chrono::minutes(5);

struct BackoffState {
  // Nothing is granted before this moment.
  std::chrono::nanoseconds paused_until{0};
  // When the current event began (the report that cut the rate).
  std::chrono::nanoseconds event_at{0};
  // The plateau of the last cut (W above): the rate in force just before it, lowered by
  // kBackoffConvergence when it came before the rate was back at the plateau before; 0: never cut.
  double rate_before_cut = 0.0;
  // Reports received, and when the last one came.
  std::int64_t throttles = 0;
  std::chrono::nanoseconds last_throttle{0};

  friend bool operator==(const BackoffState&, const BackoffState&) = default;
};

// One report of "too many" from a user of the key.
struct ThrottleReport {
  // When the throttled request was sent (no later than the report).
  std::chrono::nanoseconds sent_at{0};
  // How long the service asked to wait (Retry-After), already capped by the reporter; zero: it
  // did not say.
  std::chrono::nanoseconds retry_after{0};
};

// What one report did to the key.
struct ThrottleOutcome {
  bool new_event = false;  // the rate was cut
  bool pause_extended = false;
};

// The rate in force at `now` on a key configured at `configured` permits per second.
double rate_in_force(const BackoffState& backoff, double configured, std::chrono::nanoseconds now);

// Records `report`, received at `now`, on a key configured at `configured` whose bucket is
// `bucket`: a new event cuts the rate and drops the stored permits (and the credit of the time
// idle before it); a pause starts or lengthens
// (the bucket's next free moment moves to its end). Throws std::invalid_argument for a negative
// Retry-After or a report sent after `now`.
ThrottleOutcome record_throttle(BackoffState& backoff, BucketState& bucket, double configured,
                                const ThrottleReport& report, std::chrono::nanoseconds now);

// The bucket of `params` with the rate in force at `now` and a pause applied: what a request at
// `now` is decided on. Its state is the key's, its next free moment not before the pause's end
// and no permits stored during a pause. Without back-off (never cut, no pause in force) it is the
// bucket of `params` and `state` as is.
TokenBucket bucket_in_force(const BucketParams& params, const BucketState& state,
                            const BackoffState& backoff, std::chrono::nanoseconds now);

}  // namespace ratelimit
