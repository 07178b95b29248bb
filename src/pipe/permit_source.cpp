#include "pipe/permit_source.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "format/timetable_text.hpp"
#include "pipe/chunk.hpp"

namespace ratelimit::pipe {
namespace {

// Units booked at once at the most, for the fastest rates (and "off").
constexpr std::int64_t kLargestBooking = std::int64_t{1} << 30;
// The least a shared pipe books at a time, and keeps of a booking made at a higher rate.
constexpr std::chrono::nanoseconds kLeastBookingInterval = std::chrono::milliseconds(10);

}  // namespace

using std::chrono::nanoseconds;

namespace {

std::vector<Quota> new_quotas(const std::vector<QuotaParams>& params, nanoseconds now) {
  std::vector<Quota> quotas;
  for (const QuotaParams& quota : params) quotas.emplace_back(quota, now);
  return quotas;
}

}  // namespace

LocalPermitSource::LocalPermitSource(const BucketParams& params,
                                     const std::vector<QuotaParams>& quotas, nanoseconds now)
    : bucket_(TokenBucket(params, now), new_quotas(quotas, now)) {}

std::optional<nanoseconds> LocalPermitSource::due_time(std::int64_t units, nanoseconds now,
                                                       std::optional<std::int64_t>) {
  const nanoseconds wait = bucket_.wait_for(units, now);
  held_by_quota_ = bucket_.held_by_quota(units, now);
  return wait > nanoseconds::max() - now ? nanoseconds::max() : now + wait;
}

void LocalPermitSource::consume(std::int64_t units, nanoseconds requested_at,
                                nanoseconds moved_at) {
  // Booked in the bucket at the time of the request, as Guava's acquire() does before it sleeps,
  // so that the time spent writing is not added to the schedule.
  if (units > 0) bucket_.reserve(units, requested_at, moved_at);
}

std::vector<KeyQuotaStatus> LocalPermitSource::quota_status(nanoseconds now) {
  std::vector<KeyQuotaStatus> quotas;
  for (stores::QuotaStatus& quota : stores::quota_status(bucket_.quotas(), now))
    quotas.push_back({.key = {}, .quota = std::move(quota)});
  return quotas;
}

void LocalPermitSource::restart(nanoseconds now) {
  bucket_.rate() = TokenBucket(bucket_.rate().params(), now);
}

void LocalPermitSource::set_rate(double units_per_second, nanoseconds now) {
  stores::set_rate_by_hand(bucket_.rate(), units_per_second, now);
}

void LocalPermitSource::apply_timetable_entry(double units_per_second, std::int64_t,
                                              nanoseconds now) {
  stores::change_rate(bucket_.rate(), units_per_second, now);
}

SharedPermitSource::SharedPermitSource(stores::BucketStore& store, stores::PermitRequest request,
                                       io::Waiter& waiter, OnFollowed on_followed,
                                       OnKeyTimetable on_key_timetable, Warn warn,
                                       OnPaused on_paused,
                                       std::vector<stores::PermitRequest> more_keys)
    : store_(store),
      request_(std::move(request)),
      waiter_(waiter),
      on_followed_(std::move(on_followed)),
      on_key_timetable_(std::move(on_key_timetable)),
      warn_(std::move(warn)),
      on_paused_(std::move(on_paused)) {
  request_.apply_params = false;
  request_.deadline = nanoseconds::max();
  // A booking larger than a quota would never be granted.
  largest_booking_ = kLargestBooking;
  for (const QuotaParams& quota : request_.quotas)
    largest_booking_ = std::min(largest_booking_, largest_chunk_under_quota(quota.limit));
  for (stores::PermitRequest& key : more_keys) {
    key.apply_params = false;
    for (const QuotaParams& quota : key.quotas)
      largest_booking_ = std::min(largest_booking_, largest_chunk_under_quota(quota.limit));
    more_keys_.push_back({.request = std::move(key)});
  }
}

void SharedPermitSource::refuse_turns(std::optional<nanoseconds> longest_wait, bool at_quota) {
  longest_wait_ = longest_wait;
  refuse_quota_wait_ = at_quota;
}

std::optional<nanoseconds> SharedPermitSource::book(std::int64_t units,
                                                    std::optional<nanoseconds> waited_from) {
  request_.permits = units;
  // The store refuses such a turn without booking it: a refused run takes nothing from the key.
  request_.deadline = nanoseconds::max();
  if (waited_from && longest_wait_)
    request_.deadline = *longest_wait_ > nanoseconds::max() - *waited_from
                            ? nanoseconds::max()
                            : *waited_from + *longest_wait_;
  request_.refuse_quota_wait = waited_from && refuse_quota_wait_;
  const stores::Reservation reservation = reserve();
  if (reservation.signal != 0) return std::nullopt;
  last_held_by_quota_ = reservation.held_by_quota;
  last_refused_ = !reservation.granted;
  last_paused_for_ = reservation.paused_for;
  const nanoseconds now = waiter_.now();
  const nanoseconds due =
      reservation.wait > nanoseconds::max() - now ? nanoseconds::max() : now + reservation.wait;
  if (last_paused_for_ > nanoseconds::zero()) {
    // This pipe now waits for the pause (said once its turn after the pause holds).
    const nanoseconds pause_end = std::min(due, now + last_paused_for_);
    pause_waited_ = {pause_waited_ ? pause_waited_->first : now,
                     std::max(pause_end, pause_waited_ ? pause_waited_->second : pause_end)};
  }
  if (last_refused_) return due;
  if (tail_units_ > 0 && reservation.booked.from == tail_.until) {
    tail_.until = reservation.booked.until;
    tail_units_ += units;
  } else {
    tail_ = reservation.booked;
    tail_units_ = units;
  }
  if (reservation.followed) {
    if (reservation.tell_followed && on_followed_)
      on_followed_(request_.key, *reservation.followed);
    // The key's settings from now on, so that the next bookings are the key's own requests. Its
    // rate and timetable are taken up below.
    const double rate = request_.params.permits_per_second;
    request_.params = reservation.followed->params;
    request_.params.permits_per_second = rate;
    request_.quotas = reservation.followed->quotas;
  }
  // Only a new key takes the notation: the first booking made it, or found it.
  request_.notation.clear();
  if (reservation.key_permits_per_second != request_.params.permits_per_second) {
    // Set by `set --key` or another user's parameters: the next bookings and chunks follow it.
    request_.params.permits_per_second = reservation.key_permits_per_second;
    key_rate_news_ = reservation.key_permits_per_second;
  }
  if (reservation.key_timetable != request_.schedule.timetable) {
    // Its entry is the engine's to find: until then this source moves the key on to none.
    request_.schedule = {.timetable = reservation.key_timetable, .entry_until = 0};
    if (on_key_timetable_) on_key_timetable_(request_.key, reservation.key_timetable);
  }
  return due;
}

stores::Reservation SharedPermitSource::reserve() {
  last_held_by_key_.clear();
  if (more_keys_.empty()) {
    paused_key_ = request_.key;
    return store_.reserve(request_, waiter_);
  }
  std::vector<stores::PermitRequest> requests{request_};
  for (const OtherKey& key : more_keys_) {
    stores::PermitRequest& request = requests.emplace_back(key.request);
    request.permits = request_.permits;
    request.deadline = request_.deadline;
    request.refuse_quota_wait = request_.refuse_quota_wait;
  }
  const stores::KeysReservation decision = store_.reserve_all(requests, waiter_);
  if (decision.call.signal != 0 || decision.keys.size() != requests.size()) return decision.call;
  if (decision.held_by) last_held_by_key_ = requests[*decision.held_by].key;
  nanoseconds longest_pause{0};
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (decision.keys[i].paused_for > longest_pause) {
      longest_pause = decision.keys[i].paused_for;
      paused_key_ = requests[i].key;
    }
    if (i > 0 && decision.call.granted) take_up(more_keys_[i - 1], decision.keys[i]);
  }
  // The first key's settings and booking, the call's turn.
  stores::Reservation first = decision.keys.front();
  first.granted = decision.call.granted;
  first.wait = decision.call.wait;
  first.held_by_quota = decision.call.held_by_quota;
  first.paused_for = decision.call.paused_for;
  first.backing_off = decision.call.backing_off;
  return first;
}

void SharedPermitSource::take_up(OtherKey& key, const stores::Reservation& reservation) {
  if (key.tail_units > 0 && reservation.booked.from == key.tail.until) {
    key.tail.until = reservation.booked.until;
    key.tail_units += request_.permits;
  } else {
    key.tail = reservation.booked;
    key.tail_units = request_.permits;
  }
  if (reservation.followed) {
    if (reservation.tell_followed && on_followed_)
      on_followed_(key.request.key, *reservation.followed);
    key.request.params = reservation.followed->params;
    key.request.quotas = reservation.followed->quotas;
  }
  key.request.notation.clear();
  // The key's own rate and timetable, moved on by its other users: this pipe follows them.
  key.request.params.permits_per_second = reservation.key_permits_per_second;
  if (reservation.key_timetable != key.request.schedule.timetable) {
    key.request.schedule = {.timetable = reservation.key_timetable, .entry_until = 0};
    if (on_key_timetable_) on_key_timetable_(key.request.key, reservation.key_timetable);
  }
}

void SharedPermitSource::give_back_other_keys(std::int64_t permits) {
  for (OtherKey& key : more_keys_) {
    const std::int64_t unused = std::min(permits, key.tail_units);
    if (unused <= 0) continue;
    try {
      if (store_.give_back({.key = key.request.key, .permits = unused, .booked = key.tail}))
        key.tail_units = 0;
    } catch (const std::exception& error) {
      // The units stay booked: the key is only slower for a moment.
      if (warn_)
        warn_("key '" + key.request.key + "': " + std::to_string(unused) +
              " unused permits not given back: " + error.what());
    }
  }
}

std::int64_t SharedPermitSource::trimmed(std::int64_t booked, double rate_before) {
  const double rate = booking_rate();
  if (rate >= rate_before) return booked;
  const std::int64_t needed = default_chunk_units(rate, largest_booking_, kLeastBookingInterval);
  if (booked <= needed) return booked;
  // Where the key's next free moment is now is not known: the bookings before are given up for
  // give-backs.
  if (store_.give_back({.key = request_.key, .permits = booked - needed, .booked = tail_}))
    tail_units_ = 0;
  give_back_other_keys(booked - needed);
  return needed;
}

std::optional<nanoseconds> SharedPermitSource::due_time(std::int64_t units, nanoseconds,
                                                        std::optional<std::int64_t> units_ready) {
  if (failure_) std::rethrow_exception(failure_);
  refused_ = false;
  units_asked_ = units;
  units_ready_ = units_ready;
  if (credit_ < units && ahead_ > 0) {
    credit_ += std::exchange(ahead_, 0);
    credit_checked_ = false;
    if (ahead_due_ >= credit_due_) {
      credit_held_by_quota_ = ahead_held_by_quota_;
      credit_held_by_key_ = ahead_held_by_key_;
    }
    credit_due_ = std::max(credit_due_, ahead_due_);
  }
  if (credit_ < units) {
    const double rate_before = booking_rate();
    const std::optional<nanoseconds> due = book(units - credit_, waiter_.now());
    if (!due) return std::nullopt;
    if (last_refused_) {
      refused_ = true;
      credit_held_by_quota_ = last_held_by_quota_;
      credit_held_by_key_ = last_held_by_key_;
      return std::max(credit_due_, *due);
    }
    // Short of `units` only after a drop in rate, which makes the engine ask again anyway.
    credit_ += trimmed(units - credit_, rate_before);
    if (*due >= credit_due_) {
      credit_held_by_quota_ = last_held_by_quota_;
      credit_held_by_key_ = last_held_by_key_;
    }
    credit_due_ = std::max(credit_due_, *due);
    // A turn that has come by the answer of a booking that found the key not paused needs no
    // other look (a slow producer's chunks, booked as they come, with none ahead).
    credit_checked_ = credit_due_ <= waiter_.now() && last_paused_for_ <= nanoseconds::zero();
  }
  return credit_due_;
}

TurnCheck SharedPermitSource::check_turn() {
  Look look = ahead_ == 0 ? book_ahead() : Look::none;
  if (look == Look::none && !credit_checked_) look = look_at_pause();
  if (look == Look::stopped) return TurnCheck::stopped;
  if (look == Look::paused) {
    // Booked before the pause began, the credit's turn went to the pause: the chunk booked ahead
    // just now (or the next booking) is after it.
    credit_ = 0;
    credit_checked_ = false;
    return TurnCheck::paused;
  }
  credit_checked_ = true;
  if (pause_waited_) {
    if (on_paused_) on_paused_(paused_key_, pause_waited_->second - pause_waited_->first);
    pause_waited_.reset();
  }
  return TurnCheck::holds;
}

SharedPermitSource::Look SharedPermitSource::look_at_pause() {
  nanoseconds pause = store_.pause_left(request_.key);
  if (pause > nanoseconds::zero()) paused_key_ = request_.key;
  for (const OtherKey& key : more_keys_) {
    const nanoseconds key_pause = store_.pause_left(key.request.key);
    if (key_pause > pause) {
      pause = key_pause;
      paused_key_ = key.request.key;
    }
  }
  if (pause <= nanoseconds::zero()) return Look::clear;
  const nanoseconds now = waiter_.now();
  pause_waited_ = {pause_waited_ ? pause_waited_->first : now,
                   std::max(now + pause, pause_waited_ ? pause_waited_->second : now)};
  return Look::paused;
}

SharedPermitSource::Look SharedPermitSource::book_ahead() {
  // At least kLeastBookingInterval of the rate at a time: where a chunk is capped at a pipe's
  // capacity the store is asked at most once per interval, not once per chunk (a state-file
  // update is a write and a rename).
  const double rate_before = booking_rate();
  std::int64_t booking = std::max(
      units_asked_, default_chunk_units(rate_before, largest_booking_, kLeastBookingInterval));
  if (units_ready_) {
    // Nothing is booked ahead past the input's end: once another pipe booked after it, it could
    // not go back, and the key would idle through it.
    const std::int64_t beyond = *units_ready_ - credit_;
    if (beyond <= 0) return Look::none;
    booking = std::min(booking, beyond);
  }
  std::optional<nanoseconds> due;
  try {
    // Refused when the engine would not wait for it once the units asked for have gone.
    due = book(booking, std::max(credit_due_, waiter_.now()));
  } catch (...) {
    // The units asked for are booked: they go at their turn, and then the run ends.
    if (credit_ < units_asked_) throw;
    failure_ = std::current_exception();
    return Look::clear;
  }
  if (!due) return Look::stopped;
  const Look look = last_paused_for_ > nanoseconds::zero() ? Look::paused : Look::clear;
  // Asked for again at its turn, and refused then if it still is one not waited for.
  if (last_refused_) return look;
  ahead_ = trimmed(booking, rate_before);
  ahead_due_ = *due;
  ahead_held_by_quota_ = last_held_by_quota_;
  ahead_held_by_key_ = last_held_by_key_;
  return look;
}

void SharedPermitSource::consume(std::int64_t units, nanoseconds, nanoseconds) {
  credit_ -= units;
  // More moved than booked (what was read goes out after a stop signal): the chunk booked ahead
  // covers it first, and what is left is booked now, not waited for, so the key counts it.
  if (credit_ < 0) {
    const std::int64_t covered = std::min(-credit_, ahead_);
    ahead_ -= covered;
    credit_ += covered;
  }
  // What the store granted before it failed is used up: the run ends before more is read.
  if (failure_ && credit_ <= 0) std::rethrow_exception(failure_);
  if (credit_ < 0) {
    book(-credit_);
    credit_ = 0;
  }
}

void SharedPermitSource::finish() {
  // The units not used are the latest booked; those booked before someone else's booking stay
  // booked (stores::give_back()).
  give_back_other_keys(booked_unused());
  const std::int64_t unused = std::min(booked_unused(), tail_units_);
  if (unused <= 0) return;
  try {
    store_.give_back({.key = request_.key, .permits = unused, .booked = tail_});
    credit_ = ahead_ = 0;
  } catch (const std::exception& error) {
    // The units stay booked: the key is only slower for a moment, and the data has gone out.
    if (warn_)
      warn_("key '" + request_.key + "': " + std::to_string(unused) +
            " unused permits not given back: " + error.what());
  }
}

std::vector<KeyQuotaStatus> SharedPermitSource::quota_status(nanoseconds) {
  std::vector<KeyQuotaStatus> quotas;
  const auto add = [&](const stores::PermitRequest& request) {
    if (request.quotas.empty()) return;
    try {
      std::vector<stores::BucketStatus> buckets = store_.status(request.key);
      if (buckets.empty()) return;
      for (stores::QuotaStatus& quota : buckets.front().quotas)
        quotas.push_back(
            {.key = more_keys_.empty() ? std::string() : request.key, .quota = std::move(quota)});
    } catch (const std::exception& error) {
      if (warn_) warn_("key '" + request.key + "': its quotas are not known: " + error.what());
    }
  };
  add(request_);
  for (const OtherKey& key : more_keys_) add(key.request);
  return quotas;
}

void SharedPermitSource::set_rate(double units_per_second, nanoseconds now) {
  // The turns this pipe holds were booked at the old rate: converted as the key's.
  const double old_rate = request_.params.permits_per_second;
  const auto converted = [&](nanoseconds due) {
    return due > now ? now + stores::converted_turn(due - now, old_rate, units_per_second) : due;
  };
  credit_due_ = converted(credit_due_);
  ahead_due_ = converted(ahead_due_);
  request_.params.permits_per_second = units_per_second;
  stores::set_key_rate_by_hand(
      store_,
      {.key = request_.key, .permits_per_second = units_per_second, .schedule = request_.schedule});
}

void SharedPermitSource::apply_timetable_entry(double units_per_second, std::int64_t entry_until,
                                               nanoseconds now) {
  // Units booked before "off" may go at once: the key starts afresh too (stores::change_rate).
  if (std::isinf(units_per_second)) {
    credit_due_ = std::min(credit_due_, now);
    ahead_due_ = std::min(ahead_due_, now);
  }
  request_.params.permits_per_second = units_per_second;
  request_.schedule.entry_until = entry_until;
}

void SharedPermitSource::apply_key_timetable_entry(std::size_t other_key, double units_per_second,
                                                   std::int64_t entry_until, nanoseconds) {
  stores::PermitRequest& request = more_keys_.at(other_key).request;
  request.params.permits_per_second = units_per_second;
  request.schedule.entry_until = entry_until;
}

double SharedPermitSource::slowest_other_key_rate() const {
  double slowest = std::numeric_limits<double>::infinity();
  for (const OtherKey& key : more_keys_)
    slowest = std::min(slowest, key.request.params.permits_per_second);
  return slowest;
}

double SharedPermitSource::booking_rate() const {
  return std::min(request_.params.permits_per_second, slowest_other_key_rate());
}

void SharedPermitSource::set_timetable(const Timetable& timetable, double units_per_second,
                                       std::int64_t entry_until, nanoseconds now) {
  request_.schedule = {.timetable = format::timetable_text(timetable), .entry_until = entry_until};
  set_rate(units_per_second, now);
}

}  // namespace ratelimit::pipe
