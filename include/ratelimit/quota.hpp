#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "ratelimit/token_bucket.hpp"

namespace ratelimit {

// "At most `limit` units in any window of length `period`": every window, not only aligned ones.
struct QuotaParams {
  std::int64_t limit = 1;
  std::chrono::nanoseconds period{std::chrono::seconds(1)};

  friend bool operator==(const QuotaParams&, const QuotaParams&) = default;
};

// The most units a quota's limit, one request's permits and so a window's counts may be: 2^53 - 1,
// below which a double holds every whole number and its successor, so that a store computing in
// doubles (Redis's Lua) decides as exactly as one in integers.
inline constexpr std::int64_t kLargestExactCount = (std::int64_t{1} << 53) - 1;

// A quota counts its grants in slots of period / kQuotaSlots (rounded up to whole microseconds,
// so that a store counting in microseconds draws the same boundaries), and allows a grant when the
// kQuotaCounts slots up to the grant's hold at most the limit: one slot more than a window of the
// period spans, so that a grant delivered up to a slot late still keeps the bound. Its state is
// those kQuotaCounts counts, whatever the limit and the traffic.
inline constexpr int kQuotaSlots = 64;
inline constexpr int kQuotaCounts = kQuotaSlots + 2;

// The whole mutable state of a quota: the units granted in each of the kQuotaCounts slots up to
// and including `newest_slot` (slot i covers [i * slot_length, (i + 1) * slot_length) on the
// clock's timeline), oldest first; and `passed`, the units that bookings ahead of their moment
// shifted out of the counts while a window ending before the newest slot still held them (only
// for used(): decisions never read it).
struct QuotaState {
  std::int64_t newest_slot = 0;
  std::array<std::int64_t, kQuotaCounts> counts{};
  std::int64_t passed = 0;

  friend bool operator==(const QuotaState&, const QuotaState&) = default;
};

// One quota on a plain value: no clock, no lock, no I/O, time passed in.
//
// Why no window ever holds more than `limit`, even of the period plus a slot. Let L be the slot
// length, K = kQuotaSlots and C = kQuotaCounts = K + 2, so that K * L >= period. A grant is
// counted in the slot of the moment it is granted at, and never in a slot before the newest one (a
// later one is only more cautious), so the slots of the grants never decrease in the order they
// are booked. A grant of n in slot s is allowed only if the C slots s-K-1..s hold at most
// limit - n before it. Any window [a, a + period + L) lies within the C slots j..j+K+1 where
// j = slot(a), since (j + K + 2) * L > a + (K + 1) * L >= a + period + L. Take the grant g of the
// window booked last, in slot s <= j + K + 1: every other grant of the window was booked before g,
// in slots j..s, which lie within s-K-1..s; so when g was allowed they and g held at most `limit`.
// The slot to spare covers a delivery up to L late (a caller's wake-up, a reader's).
//
// Why at most two slots' worth is left unused. Let d = K * L - period (0 when the period is a
// multiple of K microseconds, else under K microseconds). Say the exact sliding-window rule allows
// n at t (at most limit - n granted in (t - period, t], nothing granted after t). Take
// s = slot(t + d) + 2: slots s-K-1..s-1 start at (s - K - 1) * L > t + d - K * L = t - period, so
// they hold only grants of that window, and slot s none: the request is allowed here at s * L, at
// most 2 * L + d after t.
//
// The whole arithmetic, for a store that keeps the state itself (the Redis script). With
// L = ceil(period / (K * 1us)) * 1us and slot(t) = floor(t / L):
//   new quota at now:     newest = slot(now), counts all 0.
//   earliest(n, from):    never if n > limit; else for s = max(slot(from), newest), s + 1, ...
//                         the first s with counts[s - newest ..= C - 1] summing to at most
//                         limit - n (slots after newest hold 0); the moment is max(from, s * L).
//   book(n, at, now):     s = max(slot(at), newest); when s > newest: passed = (newest > slot(now)
//                         ? passed : 0) + the counts shifted out whose slots are at or after
//                         slot(now) - C + 1; shift counts toward the oldest by s - newest (zeros
//                         come in as the newest), newest = s; counts[C - 1] += n.
//   used(now):            the counts of slots slot(now) - C + 1 ..= slot(now), plus passed when
//                         slot(now) < newest; at most the limit.
class Quota {
 public:
  // Throws std::invalid_argument naming the bad value.
  Quota(const QuotaParams& params, std::chrono::nanoseconds now);
  Quota(const QuotaParams& params, const QuotaState& state);

  // The first moment not before `from` at which `units` may be granted;
  // nanoseconds::max() if they never may (more than the limit).
  std::chrono::nanoseconds earliest(std::int64_t units, std::chrono::nanoseconds from) const;
  // Counts `units` granted at `at` (in the newest slot if `at` is before it), booked at `now`
  // (at most `at`; `at` itself when not given).
  void book(std::int64_t units, std::chrono::nanoseconds at,
            std::chrono::nanoseconds now = std::chrono::nanoseconds::max());
  // Units granted in the kQuotaCounts slots that end with the slot of `now`: what the window
  // ending now holds. Bookings in later slots are not in it; units granted before a booking ahead
  // shifted them out of the counts are (as `passed`, which may still count some a later `now` no
  // longer holds, until the newest slot begins: at most the limit, as no window holds more).
  std::int64_t used(std::chrono::nanoseconds now) const;

  const QuotaParams& params() const { return params_; }
  const QuotaState& state() const { return state_; }
  std::chrono::nanoseconds slot_length() const { return slot_length_; }

 private:
  std::int64_t slot_of(std::chrono::nanoseconds t) const;

  QuotaParams params_;
  QuotaState state_;
  std::chrono::nanoseconds slot_length_;
};

// Throws std::invalid_argument naming the bad value: the limit from 1 to kLargestExactCount, the
// period from 1 microsecond to 10 years.
void validate(const QuotaParams& params);

// A token bucket (the rate) and quotas decided together: a request is granted at the later of the
// moments at which the rate and every quota allow it, and a request that is not booked takes
// nothing from any of them.
//
// For a store that keeps the state itself: with go = max(rate's moment, every quota's
// earliest(n, rate's moment)), where the rate's moment is now + rate.wait_for(n, now):
//   book: rate.reserve(n, now); then, unless the rate is no limit, the rate's next_free moves
//         later by go minus the rate's moment (the rate's turn goes with the request: the
//         requests that queued behind a quota do not all go at once when it frees); every quota
//         books n at go.
class QuotaBucket {
 public:
  QuotaBucket(TokenBucket rate, std::vector<Quota> quotas)
      : rate_(std::move(rate)), quotas_(std::move(quotas)) {}

  // Whether `permits` are more than a quota ever allows: their wait is nanoseconds::max() and
  // reserve() books nothing.
  bool never(std::int64_t permits) const;
  // How long until `permits` may go.
  std::chrono::nanoseconds wait_for(std::int64_t permits, std::chrono::nanoseconds now) const;
  // Books `permits` and returns the wait. The quotas count them at their moment, or at
  // `moved_at` if that is later (a caller that went late counts where its units went).
  std::chrono::nanoseconds reserve(
      std::int64_t permits, std::chrono::nanoseconds now,
      std::chrono::nanoseconds moved_at = std::chrono::nanoseconds::min());
  // Whether a quota (not the rate) decides the wait of `permits` at `now`.
  bool held_by_quota(std::int64_t permits, std::chrono::nanoseconds now) const;

  TokenBucket& rate() { return rate_; }
  const TokenBucket& rate() const { return rate_; }
  const std::vector<Quota>& quotas() const { return quotas_; }
  std::vector<Quota>& quotas() { return quotas_; }

 private:
  struct Moments {
    std::chrono::nanoseconds rate_go;
    std::chrono::nanoseconds go;
  };
  Moments moments(std::int64_t permits, std::chrono::nanoseconds now) const;

  TokenBucket rate_;
  std::vector<Quota> quotas_;
};

}  // namespace ratelimit
