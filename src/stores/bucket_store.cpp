#include "stores/bucket_store.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "errors.hpp"
#include "format/checksum.hpp"
#include "format/escaping.hpp"

namespace ratelimit::stores {

using std::chrono::nanoseconds;

namespace {

// A non-negative duration in nanoseconds, truncated as Java's (long) cast, at most a century: far
// beyond any bucket's fill time, and far from overflow when subtracted from a time.
constexpr double kCenturyNs = 100.0 * 365.25 * 86400e9;

nanoseconds saturated_nanoseconds(double ns) {
  return nanoseconds(static_cast<std::int64_t>(std::min(ns, kCenturyNs)));
}

// New parameters, as Guava's setRate when only the rate changes; to or from no limit, afresh.
void change_params(TokenBucket& bucket, const BucketParams& params, nanoseconds now) {
  const double old_rate = bucket.params().permits_per_second;
  if ((std::isinf(old_rate) || std::isinf(params.permits_per_second)) &&
      old_rate != params.permits_per_second)
    bucket = TokenBucket(params, now);
  else
    bucket.reconfigure(params, now);
}

}  // namespace

void change_rate(TokenBucket& bucket, double permits_per_second, nanoseconds now) {
  BucketParams params = bucket.params();
  params.permits_per_second = permits_per_second;
  change_params(bucket, params, now);
}

nanoseconds converted_turn(nanoseconds owed, double old_rate, double new_rate) {
  if (owed <= nanoseconds::zero() || !(new_rate > old_rate) || std::isinf(new_rate)) return owed;
  return nanoseconds(
      static_cast<std::int64_t>(static_cast<double>(owed.count()) * (old_rate / new_rate)));
}

void set_rate_by_hand(TokenBucket& bucket, double permits_per_second, nanoseconds now) {
  const double old_rate = bucket.params().permits_per_second;
  const nanoseconds owed = bucket.state().next_free - now;
  change_rate(bucket, permits_per_second, now);
  const nanoseconds converted = converted_turn(owed, old_rate, permits_per_second);
  if (converted >= owed) return;
  bucket = TokenBucket(bucket.params(), BucketState{.stored_permits = bucket.state().stored_permits,
                                                    .next_free = now + converted});
}

std::optional<std::vector<BucketStatus>> set_key_rate_by_hand(BucketStore& store,
                                                              const RateChange& change) {
  const double permits_per_second = change.permits_per_second;
  std::vector<BucketStatus> before = store.status(change.key);
  if (!store.set_rate(change)) return std::nullopt;
  if (before.size() != 1 || !before.front().problem.empty()) return before;
  const double old_rate = before.front().params.permits_per_second;
  const nanoseconds owed = before.front().next_free_in;
  nanoseconds excess = owed - converted_turn(owed, old_rate, permits_per_second);
  // give_back() moves a turn back by at most a century per call, and a turn booked at a rate near
  // zero is up to 292 years ahead (the int64 limit of nanoseconds).
  constexpr int kMostCalls = 3;
  for (int call = 0; call < kMostCalls && excess > nanoseconds::zero(); ++call) {
    const double permits = std::floor(std::min(static_cast<double>(excess.count()), kCenturyNs) *
                                      permits_per_second / 1e9);
    if (!(permits >= 1.0)) break;
    const auto given = static_cast<std::int64_t>(std::min(permits, 0x1p62));
    store.give_back({.key = change.key, .permits = given, .booked = std::nullopt});
    excess -= saturated_nanoseconds(static_cast<double>(given) * (1e9 / permits_per_second));
  }
  return before;
}

bool give_back(TokenBucket& bucket, std::int64_t permits, nanoseconds now,
               const std::optional<BookingSpan>& booked) {
  const BucketParams& params = bucket.params();
  const nanoseconds next_free = bucket.state().next_free;
  // Why a give-back with `booked` never grants more than rate x time + burst. Bookings only move
  // the next free moment forward, so finding it still where the giver's bookings left it means no
  // one booked after them; and it goes back by at most what they cost, never before where they
  // found it. Every other user's turn therefore stays where it was, and later bookings queue after
  // all of them: the key's turns are those it would have given had the giver booked only what it
  // used, except that stored permits its bookings spent stay spent (fewer grants, never more).
  // Giving back what someone else's booking came after would let bookings made later move up
  // between those made earlier: three 108 ms turns in one 100 ms window.
  if (booked && next_free.count() != booked->until) return false;
  // As the core books fresh permits: permits times the stable interval, truncated.
  const nanoseconds cost =
      saturated_nanoseconds(static_cast<double>(permits) * (1e9 / params.permits_per_second));
  // Idle for longer than it takes to fill the bucket, it is full: going back further changes
  // nothing.
  const nanoseconds fill = params.shape == BucketShape::warming_up
                               ? params.warmup
                               : saturated_nanoseconds(params.max_burst_seconds * 1e9);
  nanoseconds earliest = now - fill;
  if (booked) earliest = std::max(earliest, nanoseconds(booked->from));
  const nanoseconds moved_back = std::max(next_free - cost, earliest);
  if (moved_back >= next_free) return false;
  bucket = TokenBucket(params, BucketState{.stored_permits = bucket.state().stored_permits,
                                           .next_free = moved_back});
  return true;
}

std::vector<QuotaParams> params_of(const std::vector<Quota>& quotas) {
  std::vector<QuotaParams> params;
  for (const Quota& quota : quotas) params.push_back(quota.params());
  return params;
}

namespace {

std::vector<Quota> replaced_quotas(std::vector<Quota> old_quotas,
                                   const std::vector<QuotaParams>& params, nanoseconds now) {
  std::vector<Quota> quotas;
  for (const QuotaParams& wanted : params) {
    const auto same_period = std::find_if(old_quotas.begin(), old_quotas.end(), [&](auto& old) {
      return old.params().period == wanted.period;
    });
    if (same_period == old_quotas.end()) {
      quotas.emplace_back(wanted, now);
    } else {
      quotas.emplace_back(wanted, same_period->state());
      old_quotas.erase(same_period);
    }
  }
  return quotas;
}

}  // namespace

void change_settings(TokenBucket& bucket, std::vector<Quota>& quotas, const BucketParams& params,
                     const std::vector<QuotaParams>& new_quotas, nanoseconds now) {
  change_params(bucket, params, now);
  quotas = replaced_quotas(std::move(quotas), new_quotas, now);
}

namespace {

// Whether a request that keeps the key's parameters asked for other settings than the key's: other
// parameters (under the key's own timetable, whose entries set the rate, the rate aside), another
// timetable or other quotas.
bool differs_from_key(const PermitRequest& request, const BucketParams& key_params,
                      const KeySchedule& schedule, const std::vector<QuotaParams>& key_quotas) {
  if (request.schedule.timetable != schedule.timetable || request.quotas != key_quotas) return true;
  BucketParams asked = request.params;
  if (!schedule.timetable.empty()) asked.permits_per_second = key_params.permits_per_second;
  return asked != key_params;
}

}  // namespace

void notice_followed(Reservation& reservation, const PermitRequest& request,
                     std::uint64_t& noticed) {
  if (reservation.replaced_params) noticed = 0;
  if (!reservation.followed) return;
  const BucketParams& params = request.params;
  std::string settings = fmt::format(
      "{}/{:a}/{:a}/{}/{:a}/{:d}/{:d}/{}", static_cast<int>(params.shape),
      params.permits_per_second, params.max_burst_seconds, params.warmup.count(),
      params.cold_factor, params.start_full, params.pay_first, request.schedule.timetable);
  for (const QuotaParams& quota : request.quotas)
    settings += fmt::format("/{}:{}", quota.limit, quota.period.count());
  // Never 0, which stands for none told.
  const std::uint64_t fingerprint = format::fnv1a<std::uint64_t>(settings) | 1U;
  if (fingerprint == noticed) return;
  reservation.tell_followed = true;
  noticed = fingerprint;
}

Reservation apply_settings(TokenBucket& bucket, KeySchedule& schedule, std::vector<Quota>& quotas,
                           const PermitRequest& request, nanoseconds now) {
  Reservation reservation;
  if (!request.apply_params &&
      differs_from_key(request, bucket.params(), schedule, params_of(quotas)))
    reservation.followed = KeySettings{
        .params = bucket.params(), .timetable = schedule.timetable, .quotas = params_of(quotas)};
  if (request.apply_params && request.quotas != params_of(quotas)) {
    reservation.replaced_params = bucket.params();
    reservation.replaced_timetable = schedule.timetable;
    reservation.replaced_quotas = params_of(quotas);
    quotas = replaced_quotas(std::move(quotas), request.quotas, now);
  }
  const auto replace = [&](const BucketParams& params) {
    if (!reservation.replaced_params) {
      reservation.replaced_params = bucket.params();
      reservation.replaced_timetable = schedule.timetable;
      reservation.replaced_quotas = params_of(quotas);
    }
    change_params(bucket, params, now);
  };
  if (request.apply_params && request.schedule.timetable != schedule.timetable) {
    replace(request.params);
    schedule = request.schedule;
  } else {
    if (!schedule.timetable.empty() && request.schedule.timetable == schedule.timetable &&
        request.schedule.entry_until > schedule.entry_until) {
      schedule.entry_until = request.schedule.entry_until;
      change_rate(bucket, request.params.permits_per_second, now);
    }
    if (request.apply_params) {
      BucketParams wanted = request.params;
      // Under a timetable the rate is the latest entry's, settled above.
      if (!schedule.timetable.empty())
        wanted.permits_per_second = bucket.params().permits_per_second;
      if (wanted != bucket.params()) replace(wanted);
    }
  }
  reservation.key_timetable = schedule.timetable;
  reservation.key_permits_per_second = bucket.params().permits_per_second;
  return reservation;
}

nanoseconds timeout_of(const PermitRequest& request, nanoseconds now) {
  return request.deadline == nanoseconds::max()
             ? nanoseconds::max()
             : std::max(request.deadline - now, nanoseconds::zero());
}

Reservation decide(TokenBucket& bucket, KeySchedule& schedule, std::vector<Quota>& quotas,
                   const PermitRequest& request, nanoseconds now, const BackoffState& backoff) {
  Reservation reservation = apply_settings(bucket, schedule, quotas, request, now);
  reservation.paused_for = std::max(backoff.paused_until - now, nanoseconds::zero());
  reservation.backing_off = backoff.throttles > 0;
  const nanoseconds timeout = timeout_of(request, now);
  const TokenBucket in_force = bucket_in_force(bucket.params(), bucket.state(), backoff, now);
  const nanoseconds found = in_force.state().next_free;
  QuotaBucket limits(in_force, quotas);
  const nanoseconds wait = limits.wait_for(request.permits, now);
  reservation.held_by_quota = limits.held_by_quota(request.permits, now);
  reservation.granted =
      !limits.never(request.permits) && wait <= timeout &&
      !(request.refuse_quota_wait && reservation.held_by_quota && wait > nanoseconds::zero());
  if (!reservation.granted) {
    reservation.wait = wait;
    return reservation;
  }
  reservation.wait = limits.reserve(request.permits, now);
  bucket = TokenBucket(bucket.params(), limits.rate().state());
  quotas = limits.quotas();
  reservation.booked = {.from = found.count(), .until = bucket.state().next_free.count()};
  return reservation;
}

void check_keys_of_call(const std::vector<PermitRequest>& requests) {
  if (requests.empty()) throw UsageError("a call names at least one key");
  if (requests.size() > kMaxKeysPerCall)
    throw UsageError(fmt::format("too many keys in one call: {} given, at most {}", requests.size(),
                                 kMaxKeysPerCall));
  std::set<std::string> seen;
  for (const PermitRequest& request : requests) {
    if (!seen.insert(request.key).second)
      throw UsageError(fmt::format("key '{}' is named twice in one call: name each key once",
                                   format::escaped_bytes(request.key)));
    if (request.deadline != requests.front().deadline)
      throw UsageError("the keys of one call share one deadline");
  }
}

KeysReservation BucketStore::reserve_all(const std::vector<PermitRequest>& requests,
                                         io::Waiter& waiter) {
  check_keys_of_call(requests);
  if (requests.size() > 1) throw UsageError("this store cannot decide several keys in one call");
  KeysReservation decision;
  decision.call = reserve(requests.front(), waiter);
  decision.keys.push_back(decision.call);
  if (decision.call.wait > nanoseconds::zero()) decision.held_by = 0;
  return decision;
}

BucketStatus describe(const std::string& key, TokenBucket configured, KeySchedule schedule,
                      const std::vector<Quota>& quotas, nanoseconds now,
                      const BackoffState& backoff) {
  TokenBucket bucket = bucket_in_force(configured.params(), configured.state(), backoff, now);
  // Reconfiguring with the same parameters only brings the stored permits up to now.
  bucket.reconfigure(bucket.params(), now);
  BucketStatus status{.key = key,
                      .problem = {},
                      .params = configured.params(),
                      .schedule = std::move(schedule),
                      .stored_permits = bucket.state().stored_permits,
                      .next_free_in = std::max(bucket.state().next_free - now, nanoseconds::zero()),
                      .quotas = quota_status(quotas, now),
                      .notation = {},
                      .rate_in_force = bucket.params().permits_per_second,
                      .paused_for = std::max(backoff.paused_until - now, nanoseconds::zero()),
                      .throttles = backoff.throttles,
                      .last_throttle_ago = backoff.throttles > 0 ? now - backoff.last_throttle
                                                                 : nanoseconds::zero()};
  return status;
}

std::optional<ThrottleResult> BucketStore::throttle(const ThrottleRequest& /*request*/) {
  throw UsageError("this store keeps no back-off");
}

ThrottleResult record_throttle_report(BackoffState& backoff, BucketState& state,
                                      const BucketParams& params, const ThrottleRequest& request,
                                      nanoseconds now) {
  // Within a century, which no request takes, and far from overflow when subtracted from a time.
  const nanoseconds sent_at =
      now - std::clamp(request.sent_before, nanoseconds::zero(), saturated_nanoseconds(kCenturyNs));
  ThrottleResult result;
  result.outcome = record_throttle(backoff, state, params.permits_per_second,
                                   {.sent_at = sent_at, .retry_after = request.retry_after}, now);
  result.paused_for = std::max(backoff.paused_until - now, nanoseconds::zero());
  result.rate_in_force = rate_in_force(backoff, params.permits_per_second, now);
  return result;
}

std::vector<QuotaStatus> quota_status(const std::vector<Quota>& quotas, nanoseconds now) {
  std::vector<QuotaStatus> status;
  for (const Quota& quota : quotas)
    status.push_back({.params = quota.params(),
                      .used = quota.used(now),
                      .next_free_in = quota.earliest(1, now) - now});
  return status;
}

}  // namespace ratelimit::stores
