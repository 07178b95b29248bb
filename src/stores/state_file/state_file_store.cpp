#include "stores/state_file/state_file_store.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <numeric>

#include "stores/multi_key.hpp"
#include "stores/state_file/state_file_format.hpp"

namespace ratelimit::stores::state_file {

namespace {

// The wait as of the answer rather than of the decision: the caller counts it from when the answer
// came, and the time the record took to save (a write and a rename, which a busy disk can hold
// for tens of milliseconds) would otherwise push its turn that much past the one booked, into
// the next user's turn.
void count_wait_from_answer(Reservation& reservation, std::chrono::nanoseconds since_decided) {
  reservation.wait = std::max(reservation.wait - since_decided, std::chrono::nanoseconds::zero());
}

}  // namespace

Store::Store(state::StateDirectory directory, Clock& clock, HostId host, Notify notify)
    : directory_(std::move(directory)),
      clock_(clock),
      host_(std::move(host)),
      notify_(std::move(notify)) {}

DecodedRecord Store::load(const state::LockedFile& file, std::chrono::nanoseconds now) const {
  const std::string bytes = file.read(kMaxRecordBytes);
  if (bytes.empty()) return {.record = {}, .problem = {}};
  DecodedRecord decoded = decode_record(bytes, now);
  if (!decoded.record) return decoded;
  const StateRecord& record = *decoded.record;
  // Another machine's clock and bookings mean nothing here, and taking its record as a fresh
  // bucket would let callers that alternate between two hosts through a shared directory (NFS,
  // a shared home) go unlimited.
  if (!record.machine_id.empty() && !host_.machine_id.empty() &&
      record.machine_id != host_.machine_id)
    throw UnsafeStateError(fmt::format(
        "state file '{}/{}' was written on another machine (machine id {}, this is {}): a state "
        "directory shared by hosts cannot keep one limit; use a directory of this host's "
        "(--state-dir)",
        directory_.path(), file.name(), record.machine_id, host_.machine_id));
  if (record.boot_id != host_.boot_id)
    return {.record = {}, .problem = "state from a previous boot"};
  return decoded;
}

Store::KeyLimits Store::load_bucket(const state::LockedFile& file, const PermitRequest& request,
                                    std::chrono::nanoseconds now) const {
  DecodedRecord loaded = load(file, now);
  if (!loaded.problem.empty())
    notify_(fmt::format("key '{}': {}; starting a fresh bucket", request.key, loaded.problem));
  if (!loaded.record) {
    std::vector<Quota> quotas;
    for (const QuotaParams& quota : request.quotas) quotas.emplace_back(quota, now);
    return {.bucket = TokenBucket(request.params, now),
            .schedule = request.schedule,
            .quotas = std::move(quotas),
            .notation = {},
            .noticed = 0,
            .backoff = {},
            .fresh = true};
  }
  return {.bucket = TokenBucket(loaded.record->params, loaded.record->state),
          .schedule = std::move(loaded.record->schedule),
          .quotas = std::move(loaded.record->quotas),
          .notation = std::move(loaded.record->notation),
          .noticed = loaded.record->noticed,
          .backoff = loaded.record->backoff,
          .fresh = false};
}

void Store::save(state::LockedFile& file, const TokenBucket& bucket, const KeySchedule& schedule,
                 const std::vector<Quota>& quotas, const std::string& notation,
                 std::uint64_t noticed, const BackoffState& backoff) const {
  file.replace(encode_record({.params = bucket.params(),
                              .state = bucket.state(),
                              .schedule = schedule,
                              .quotas = quotas,
                              .notation = notation,
                              .noticed = noticed,
                              .backoff = backoff,
                              .machine_id = host_.machine_id,
                              .boot_id = host_.boot_id}));
}

Reservation Store::reserve(const PermitRequest& request, io::Waiter& waiter) {
  return state::unavailable_on_failure(directory_, [&]() -> Reservation {
    state::LockWait locked =
        directory_.lock_until(bucket_file_name(request.key), waiter, request.deadline);
    if (!locked.file)
      return {.granted = false, .wait = {}, .signal = locked.signal, .replaced_params = {}};
    // Read under the lock, so that the order of the times is the order of the bookings.
    const auto now = clock_.now();
    auto [bucket, schedule, quotas, notation, noticed, backoff, fresh] =
        load_bucket(*locked.file, request, now);
    Reservation reservation = decide(bucket, schedule, quotas, request, now, backoff);
    notice_followed(reservation, request, noticed);
    if (fresh || (request.apply_params && reservation.replaced_params)) notation = request.notation;
    save(*locked.file, bucket, schedule, quotas, notation, noticed, backoff);
    count_wait_from_answer(reservation, clock_.now() - now);
    return reservation;
  });
}

KeysReservation Store::reserve_all(const std::vector<PermitRequest>& requests, io::Waiter& waiter) {
  check_keys_of_call(requests);
  if (requests.size() == 1) return BucketStore::reserve_all(requests, waiter);
  return state::unavailable_on_failure(directory_, [&]() -> KeysReservation {
    std::vector<std::size_t> lock_order(requests.size());
    std::iota(lock_order.begin(), lock_order.end(), std::size_t{0});
    std::vector<std::string> names;
    for (const PermitRequest& request : requests) names.push_back(bucket_file_name(request.key));
    std::sort(lock_order.begin(), lock_order.end(),
              [&](std::size_t a, std::size_t b) { return names[a] < names[b]; });
    std::vector<std::optional<state::LockedFile>> files(requests.size());
    for (const std::size_t i : lock_order) {
      state::LockWait locked = directory_.lock_until(names[i], waiter, requests[i].deadline);
      if (!locked.file) {
        KeysReservation refused;
        refused.call.signal = locked.signal;
        return refused;
      }
      files[i] = std::move(locked.file);
    }
    // Read under every lock, so that the order of the times is the order of the bookings.
    const auto now = clock_.now();
    std::vector<KeyLimits> loaded;
    loaded.reserve(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i)
      loaded.push_back(load_bucket(*files[i], requests[i], now));
    std::vector<KeyInCall> keys;
    for (std::size_t i = 0; i < requests.size(); ++i)
      keys.push_back(key_in_call(loaded[i], requests[i]));
    KeysReservation decision = decide_all(keys, now);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      KeyLimits& key = loaded[i];
      notice_followed(decision.keys[i], requests[i], key.noticed);
      if (key.fresh || (requests[i].apply_params && decision.keys[i].replaced_params))
        key.notation = requests[i].notation;
      save(*files[i], key.bucket, key.schedule, key.quotas, key.notation, key.noticed, key.backoff);
    }
    const auto saving = clock_.now() - now;
    count_wait_from_answer(decision.call, saving);
    for (Reservation& key : decision.keys) count_wait_from_answer(key, saving);
    return decision;
  });
}

bool Store::update_existing(const std::string& key, const Update& update) {
  return state::unavailable_on_failure(directory_, [&] {
    std::optional<state::LockedFile> file =
        directory_.lock_existing(bucket_file_name(key), state::LockKind::exclusive);
    if (!file) return false;
    const auto now = clock_.now();
    DecodedRecord loaded = load(*file, now);
    if (!loaded.record) return false;
    TokenBucket bucket(loaded.record->params, loaded.record->state);
    update(bucket, loaded.record->schedule, loaded.record->noticed, now);
    save(*file, bucket, loaded.record->schedule, loaded.record->quotas, loaded.record->notation,
         loaded.record->noticed, loaded.record->backoff);
    return true;
  });
}

bool Store::set_rate(const RateChange& change) {
  if (change.settings) return set_settings(change);
  return update_existing(change.key, [&](TokenBucket& bucket, KeySchedule& kept,
                                         std::uint64_t& noticed, std::chrono::nanoseconds now) {
    change_rate(bucket, change.permits_per_second, now);
    kept = change.schedule;
    // New settings: the next user whose own differ is told.
    noticed = 0;
  });
}

bool Store::set_settings(const RateChange& change) {
  return state::unavailable_on_failure(directory_, [&] {
    state::LockedFile file =
        directory_.lock(bucket_file_name(change.key), state::LockKind::exclusive);
    const auto now = clock_.now();
    DecodedRecord loaded = load(file, now);
    const KeySettings& settings = *change.settings;
    if (!loaded.record) {
      std::vector<Quota> quotas;
      for (const QuotaParams& quota : settings.quotas) quotas.emplace_back(quota, now);
      save(file, TokenBucket(settings.params, now), change.schedule, quotas, {}, 0, {});
      return true;
    }
    TokenBucket bucket(loaded.record->params, loaded.record->state);
    change_settings(bucket, loaded.record->quotas, settings.params, settings.quotas, now);
    // New settings: the next user whose own differ is told.
    save(file, bucket, change.schedule, loaded.record->quotas, loaded.record->notation, 0,
         loaded.record->backoff);
    return true;
  });
}

std::optional<ThrottleResult> Store::throttle(const ThrottleRequest& request) {
  return state::unavailable_on_failure(directory_, [&]() -> std::optional<ThrottleResult> {
    std::optional<state::LockedFile> file =
        directory_.lock_existing(bucket_file_name(request.key), state::LockKind::exclusive);
    if (!file) return std::nullopt;
    const auto now = clock_.now();
    DecodedRecord loaded = load(*file, now);
    if (!loaded.record) return std::nullopt;
    StateRecord& record = *loaded.record;
    const ThrottleResult result =
        record_throttle_report(record.backoff, record.state, record.params, request, now);
    save(*file, TokenBucket(record.params, record.state), record.schedule, record.quotas,
         record.notation, record.noticed, record.backoff);
    return result;
  });
}

std::chrono::nanoseconds Store::pause_left(const std::string& key) {
  return state::unavailable_on_failure(directory_, [&] {
    std::optional<state::LockedFile> file =
        directory_.lock_existing(bucket_file_name(key), state::LockKind::shared);
    if (!file) return std::chrono::nanoseconds::zero();
    const auto now = clock_.now();
    const DecodedRecord loaded = load(*file, now);
    if (!loaded.record) return std::chrono::nanoseconds::zero();
    return std::max(loaded.record->backoff.paused_until - now, std::chrono::nanoseconds::zero());
  });
}

bool Store::give_back(const UnusedPermits& unused) {
  bool moved = false;
  update_existing(unused.key, [&](TokenBucket& bucket, KeySchedule&, std::uint64_t&,
                                  std::chrono::nanoseconds now) {
    moved = stores::give_back(bucket, unused.permits, now, unused.booked);
  });
  return moved;
}

std::vector<BucketStatus> Store::status(const std::optional<std::string>& key) {
  std::vector<BucketStatus> buckets;
  const std::vector<std::string> names =
      state::unavailable_on_failure(directory_, [&] { return directory_.file_names(); });
  for (const std::string& name : names) {
    const std::optional<std::string> file_key = key_of_bucket_file(name);
    if (!file_key || (key && *key != *file_key)) continue;
    // One unreadable or hostile file (a symlink, a FIFO, no permission) is reported as such and
    // does not hide the other buckets.
    std::optional<state::LockedFile> file;
    DecodedRecord loaded;
    std::chrono::nanoseconds now{};
    try {
      file = directory_.lock_existing(name, state::LockKind::shared);
      if (!file) continue;  // reset meanwhile
      now = clock_.now();
      loaded = load(*file, now);
    } catch (const std::exception& error) {
      BucketStatus unusable;
      unusable.key = *file_key;
      unusable.problem = error.what();
      buckets.push_back(std::move(unusable));
      continue;
    }
    if (loaded.record) {
      buckets.push_back(
          describe(*file_key, TokenBucket(loaded.record->params, loaded.record->state),
                   loaded.record->schedule, loaded.record->quotas, now, loaded.record->backoff));
      buckets.back().notation = loaded.record->notation;
    } else {
      BucketStatus unusable;
      unusable.key = *file_key;
      unusable.problem = loaded.problem.empty() ? "empty record" : loaded.problem;
      buckets.push_back(std::move(unusable));
    }
  }
  return buckets;
}

bool Store::reset(const std::string& key) {
  return state::unavailable_on_failure(directory_,
                                       [&] { return directory_.remove(bucket_file_name(key)); });
}

}  // namespace ratelimit::stores::state_file
