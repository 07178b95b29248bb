#include "stores/fallback_store.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "errors.hpp"
#include "stores/multi_key.hpp"

namespace ratelimit::stores {
namespace {

// Bookings remembered per key: a pipe holds at most its current chunk and the one booked ahead,
// each made of a booking or two.
constexpr std::size_t kRememberedBookings = 8;

}  // namespace

FallbackStore::FallbackStore(std::unique_ptr<BucketStore> shared, std::string shared_name,
                             UnavailablePolicy policy, OpenLocal open_local, Warn warn,
                             RunInBackground run_in_background)
    : shared_(std::move(shared)),
      shared_name_(std::move(shared_name)),
      policy_(std::move(policy)),
      open_local_(std::move(open_local)),
      warn_(std::move(warn)),
      run_in_background_(std::move(run_in_background)) {}

// The probe uses shared_: it ends first.
FallbackStore::~FallbackStore() { probe_.reset(); }

std::string FallbackStore::said_as() const {
  return policy_.said_as.empty() ? "" : " (" + policy_.said_as + ")";
}

Reservation FallbackStore::reserve(const PermitRequest& request, io::Waiter& waiter) {
  if (outage_ && !probe_answered(request.key, waiter.now()))
    return reserve_by_policy(request, waiter);
  try {
    Reservation reservation = shared_->reserve(request, waiter);
    if (outage_) {
      // A decision made: the store is back, not merely answering PING.
      outage_ = false;
      warn_(fmt::format("{} answers again; back on the shared bucket '{}'{}", shared_name_,
                        request.key, said_as()));
    }
    if (reservation.granted) note_booking(request.key, Store::shared, request.permits);
    return reservation;
  } catch (const StoreUnavailable& error) {
    // Still away (out of memory, a replica, a script it cannot run): said once, when it went.
    if (!outage_) {
      if (policy_.action == OnUnavailable::fail) throw;
      begin_outage(error, {request.key}, waiter.now());
    }
  }
  return reserve_by_policy(request, waiter);
}

KeysReservation FallbackStore::reserve_all(const std::vector<PermitRequest>& requests,
                                           io::Waiter& waiter) {
  check_keys_of_call(requests);
  if (requests.size() == 1) return BucketStore::reserve_all(requests, waiter);
  const std::string& first_key = requests.front().key;
  if (!outage_ || probe_answered(first_key, waiter.now())) {
    try {
      KeysReservation decision = shared_->reserve_all(requests, waiter);
      if (outage_) {
        outage_ = false;
        warn_(fmt::format("{} answers again; back on the shared bucket '{}'{}", shared_name_,
                          first_key, said_as()));
      }
      if (decision.call.granted)
        for (const PermitRequest& request : requests)
          note_booking(request.key, Store::shared, request.permits);
      return decision;
    } catch (const StoreUnavailable& error) {
      if (!outage_) {
        if (policy_.action == OnUnavailable::fail) throw;
        std::vector<std::string> keys;
        for (const PermitRequest& request : requests) keys.push_back(request.key);
        begin_outage(error, keys, waiter.now());
      }
    }
  }
  KeysReservation decision;
  if (policy_.action == OnUnavailable::allow) {
    for (const PermitRequest& request : requests)
      decision.keys.push_back(reserve_by_policy(request, waiter));
    decision.call = decision.keys.front();
    return decision;
  }
  if (!local_) local_ = open_local_();
  std::vector<PermitRequest> shares = requests;
  for (PermitRequest& share : shares) {
    share.params.permits_per_second *= policy_.local_share;
    share.apply_params = true;
  }
  decision = local_->reserve_all(shares, waiter);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Reservation& reservation = decision.keys[i];
    if (decision.call.granted) note_booking(requests[i].key, Store::local, requests[i].permits);
    // As reserve_by_policy(): this host's buckets stand in for the keys.
    reservation.replaced_params.reset();
    reservation.replaced_timetable.clear();
    reservation.followed.reset();
    reservation.key_timetable = requests[i].schedule.timetable;
    reservation.key_permits_per_second = requests[i].params.permits_per_second;
  }
  return decision;
}

void FallbackStore::begin_outage(const StoreUnavailable& error,
                                 const std::vector<std::string>& keys,
                                 std::chrono::nanoseconds now) {
  outage_ = true;
  next_probe_at_ = now + kProbeInterval;
  if (policy_.action == OnUnavailable::allow) {
    warn_(std::string(error.what()) + "; running unthrottled" + said_as());
    return;
  }
  const std::string share = policy_.local_share < 1.0
                                ? fmt::format(" at {:g}% of the rate", policy_.local_share * 100)
                                : "";
  std::string buckets = keys.size() == 1 ? "bucket" : "buckets";
  for (std::size_t i = 0; i < keys.size(); ++i) buckets += (i == 0 ? " '" : ", '") + keys[i] + "'";
  warn_(std::string(error.what()) + "; using this host's " + buckets + share + said_as());
}

bool FallbackStore::probe_answered(const std::string& key, std::chrono::nanoseconds now) {
  if (probe_) {
    if (!probe_->done()) return false;
    probe_.reset();
    if (probe_answered_) return true;
  }
  if (now >= next_probe_at_) {
    next_probe_at_ = now + kProbeInterval;
    probe_answered_ = false;
    probe_ = run_in_background_([this, key](io::Waiter& probe_waiter) {
      shared_->ping(key, probe_waiter);
      probe_answered_ = true;
    });
  }
  return false;
}

BucketStore& FallbackStore::shared_alone() {
  probe_.reset();
  return *shared_;
}

Reservation FallbackStore::reserve_by_policy(const PermitRequest& request, io::Waiter& waiter) {
  if (policy_.action == OnUnavailable::allow) {
    note_booking(request.key, Store::none, request.permits);
    // Unthrottled: the request's timetable and rate stand, so that a pipe following them keeps
    // them.
    return {.granted = true,
            .wait = std::chrono::nanoseconds::zero(),
            .signal = 0,
            .replaced_params = {},
            .replaced_timetable = {},
            .key_timetable = request.schedule.timetable,
            .key_permits_per_second = request.params.permits_per_second};
  }
  if (!local_) local_ = open_local_();
  // This host's bucket holds its share of the key's rate, whatever it held before.
  PermitRequest share = request;
  share.params.permits_per_second *= policy_.local_share;
  share.apply_params = true;
  Reservation reservation = local_->reserve(share, waiter);
  if (reservation.granted) note_booking(request.key, Store::local, request.permits);
  // The user goes on following the key's rate and timetable as it knew them: the host's bucket
  // stands in for the key, and what it held before is not the key's news.
  reservation.replaced_params.reset();
  reservation.replaced_timetable.clear();
  reservation.followed.reset();
  reservation.key_timetable = request.schedule.timetable;
  reservation.key_permits_per_second = request.params.permits_per_second;
  return reservation;
}

void FallbackStore::note_booking(const std::string& key, Store store, std::int64_t permits) {
  std::deque<Booking>& bookings = bookings_[key];
  bookings.push_back({.store = store, .permits = permits});
  if (bookings.size() > kRememberedBookings) bookings.pop_front();
}

bool FallbackStore::set_rate(const RateChange& change) { return shared_alone().set_rate(change); }

std::vector<BucketStatus> FallbackStore::status(const std::optional<std::string>& key) {
  return shared_alone().status(key);
}

bool FallbackStore::reset(const std::string& key) { return shared_alone().reset(key); }

std::optional<ThrottleResult> FallbackStore::throttle(const ThrottleRequest& request) {
  return shared_alone().throttle(request);
}

std::chrono::nanoseconds FallbackStore::pause_left(const std::string& key) {
  return outage_ ? std::chrono::nanoseconds::zero() : shared_alone().pause_left(key);
}

bool FallbackStore::give_back_to(Store store, const UnusedPermits& unused) {
  if (store == Store::local) return local_->give_back(unused);
  // None to the shared store while it is away (they stay booked there), none when unthrottled.
  if (store == Store::shared && !outage_) return shared_alone().give_back(unused);
  return false;
}

bool FallbackStore::give_back(const UnusedPermits& unused) {
  // The unused permits are the latest booked: each part goes back where it was booked.
  const std::string& key = unused.key;
  std::int64_t permits = unused.permits;
  std::deque<Booking>& bookings = bookings_[key];
  bool moved = false;
  if (unused.booked) {
    // A span is on one store's timeline: it goes there in one call, with what the latest
    // bookings there hold.
    if (bookings.empty()) return give_back_to(Store::shared, unused);
    const Store store = bookings.back().store;
    std::int64_t held = 0;
    while (held < permits && !bookings.empty() && bookings.back().store == store) {
      Booking& latest = bookings.back();
      const std::int64_t taken = std::min(permits - held, latest.permits);
      held += taken;
      latest.permits -= taken;
      if (latest.permits == 0) bookings.pop_back();
    }
    return give_back_to(store, {.key = key, .permits = held, .booked = unused.booked});
  }
  while (permits > 0 && !bookings.empty()) {
    Booking& latest = bookings.back();
    const std::int64_t returned = std::min(permits, latest.permits);
    moved |= give_back_to(latest.store, {.key = key, .permits = returned, .booked = std::nullopt});
    latest.permits -= returned;
    permits -= returned;
    if (latest.permits == 0) bookings.pop_back();
  }
  // Permits this run did not book are the key's own (set_key_rate_by_hand() gives back a turn
  // booked at an old rate): they go to the shared store, unless it is away.
  if (permits > 0)
    moved |= give_back_to(Store::shared, {.key = key, .permits = permits, .booked = std::nullopt});
  return moved;
}

}  // namespace ratelimit::stores
