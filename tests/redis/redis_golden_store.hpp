#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../unit/golden_vectors.hpp"
#include "stores/redis/redis_store.hpp"

namespace ratelimit::stores::redis {

// The golden vectors through the script (directly or through the agent), with the times injected.
class RedisGoldenStore final : public testing::GoldenStore {
 public:
  RedisGoldenStore(Store& store, std::string key) : store_(store), key_(std::move(key)) {
    store_.reset(key_);
  }
  testing::GoldenAnswer request(const testing::GoldenRequest& golden) override {
    PermitRequest permits = request_for(golden);
    return testing::golden_answer(store_.reserve_at(permits, golden.timeout, micros(golden.at)));
  }
  void set_rate(const testing::GoldenSetRate& change) override {
    EXPECT_TRUE(store_.set_rate_at(
        {.key = key_,
         .permits_per_second = change.rate,
         .schedule = {.timetable = change.timetable, .entry_until = change.entry_until}},
        micros(change.at)));
  }
  bool give_back(const testing::GoldenGiveBack& unused,
                 const std::optional<BookingSpan>& booked) override {
    return store_.give_back_at({.key = key_, .permits = unused.permits, .booked = booked},
                               micros(unused.at));
  }
  // Each key is this store's key, a colon and the vector's name of it.
  testing::GoldenKeysAnswer request_all(const std::vector<testing::GoldenRequest>& keys) override {
    std::vector<PermitRequest> requests;
    for (const testing::GoldenRequest& golden : keys) {
      requests.push_back(request_for(golden));
      requests.back().key = key_ + ":" + golden.key;
      if (made_.insert(requests.back().key).second) store_.reset(requests.back().key);
    }
    return testing::golden_keys_answer(
        store_.reserve_all_at(requests, keys.front().timeout, micros(keys.front().at)));
  }
  std::optional<ThrottleResult> throttle(const testing::GoldenThrottle& report) override {
    return store_.throttle_at(
        {.key = key_, .sent_before = report.sent_before, .retry_after = report.retry_after},
        micros(report.at));
  }
  std::vector<testing::GoldenQuotaStatus> status(std::chrono::nanoseconds at) override {
    const std::optional<BucketStatus> status = store_.status_at(key_, micros(at));
    if (!status) return {};
    return testing::golden_quotas(status->quotas);
  }

 private:
  static std::int64_t micros(std::chrono::nanoseconds at) {
    return std::chrono::duration_cast<std::chrono::microseconds>(at).count();
  }
  PermitRequest request_for(const testing::GoldenRequest& golden) const {
    PermitRequest permits;
    permits.key = key_;
    permits.params = golden.params;
    permits.apply_params = golden.apply_params;
    permits.schedule = {.timetable = golden.timetable, .entry_until = golden.entry_until};
    permits.quotas = golden.quotas;
    permits.permits = golden.permits;
    return permits;
  }
  Store& store_;
  std::string key_;
  std::set<std::string> made_;  // request_all's keys, reset before their first use
};

}  // namespace ratelimit::stores::redis
