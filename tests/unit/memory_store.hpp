#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/waiter.hpp"
#include "pipe/io.hpp"
#include "stores/bucket_store.hpp"

namespace ratelimit::testing {

// Waits that end at once, on the clock of a pipe::Io: a shared source waits only for a store,
// and a store in memory never makes it wait.
class IoClockWaiter final : public io::Waiter {
 public:
  explicit IoClockWaiter(pipe::Io& io) : io_(io) {}
  std::chrono::nanoseconds now() override { return io_.now(); }
  int wait_until(std::chrono::nanoseconds, std::span<pollfd>) override { return 0; }

 private:
  pipe::Io& io_;
};

// One shared bucket kept in memory on the clock of a pipe::Io, deciding as every store does
// (stores::decide). Another user may set its rate and schedule just before a given call.
class MemoryStore : public stores::BucketStore {
 public:
  explicit MemoryStore(pipe::Io& io) : io_(io) {}
  stores::Reservation reserve(const stores::PermitRequest& request, io::Waiter&) override {
    if (!bucket) {
      bucket.emplace(request.params, io_.now());
      schedule = request.schedule;
      for (const QuotaParams& quota : request.quotas) quotas.emplace_back(quota, io_.now());
    }
    if (++calls == other_user_at_call)
      set_rate({.key = request.key,
                .permits_per_second = other_user_rate,
                .schedule = other_user_schedule});
    applied.push_back(request.apply_params);
    throttle_if_due();
    stores::Reservation reservation =
        stores::decide(*bucket, schedule, quotas, request, io_.now(), backoff);
    stores::notice_followed(reservation, request, noticed);
    if (reservation.granted) booked += request.permits;
    return reservation;
  }
  bool set_rate(const stores::RateChange& change) override {
    if (change.settings && !bucket) {
      bucket.emplace(change.settings->params, io_.now());
      for (const QuotaParams& quota : change.settings->quotas)
        quotas.emplace_back(quota, io_.now());
    } else if (change.settings) {
      stores::change_settings(*bucket, quotas, change.settings->params, change.settings->quotas,
                              io_.now());
    } else if (bucket) {
      stores::change_rate(*bucket, change.permits_per_second, io_.now());
    } else {
      return false;
    }
    schedule = change.schedule;
    noticed = 0;
    return true;
  }
  std::vector<stores::BucketStatus> status(const std::optional<std::string>&) override {
    return {};
  }
  bool reset(const std::string&) override { return false; }
  bool give_back(const stores::UnusedPermits& unused) override {
    const bool moved = stores::give_back(*bucket, unused.permits, io_.now(), unused.booked);
    if (moved) given_back += unused.permits;
    return moved;
  }

  std::chrono::nanoseconds pause_left(const std::string&) override {
    ++pause_asked;
    throttle_if_due();
    return std::max(backoff.paused_until - io_.now(), std::chrono::nanoseconds::zero());
  }

  std::optional<TokenBucket> bucket;
  // A throttle that another user reports at `throttle_at` with its Retry-After; the store takes
  // it as of then at its next call.
  std::optional<std::chrono::nanoseconds> throttle_at;
  std::chrono::nanoseconds retry_after{0};
  BackoffState backoff;
  int pause_asked = 0;
  stores::KeySchedule schedule;
  std::vector<Quota> quotas;
  std::uint64_t noticed = 0;  // stores::notice_followed()'s record
  std::vector<bool> applied;  // each call's apply_params
  std::int64_t booked = 0;
  std::int64_t given_back = 0;
  int calls = 0;
  int other_user_at_call = 0;  // counted from 1; 0: never
  double other_user_rate = 0.0;
  stores::KeySchedule other_user_schedule;

 private:
  void throttle_if_due() {
    if (!throttle_at || !bucket || io_.now() < *throttle_at) return;
    BucketState state = bucket->state();
    record_throttle(backoff, state, bucket->params().permits_per_second,
                    {.sent_at = *throttle_at, .retry_after = retry_after}, *throttle_at);
    bucket.emplace(bucket->params(), state);
    throttle_at.reset();
  }

  pipe::Io& io_;
};

}  // namespace ratelimit::testing
