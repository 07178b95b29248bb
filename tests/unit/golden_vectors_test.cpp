#include "golden_vectors.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "stores/bucket_store.hpp"
#include "stores/multi_key.hpp"
#include "stores/state_file/state_file_store.hpp"
#include "temp_dir.hpp"

namespace ratelimit::testing {
namespace {

using std::chrono::nanoseconds;

// The keys of these calls were never throttled.
const BackoffState kNeverThrottled{};

// The request a vector's line makes of a store whose timeline is the vector's moved by `origin`.
stores::PermitRequest permit_request(const GoldenRequest& request, nanoseconds origin) {
  stores::PermitRequest permits;
  permits.key = request.key.empty() ? "golden" : request.key;
  permits.params = request.params;
  permits.apply_params = request.apply_params;
  permits.schedule = {.timetable = request.timetable, .entry_until = request.entry_until};
  permits.quotas = request.quotas;
  permits.permits = request.permits;
  const nanoseconds at = origin + request.at;
  if (request.timeout != nanoseconds::max())
    permits.deadline =
        request.timeout > nanoseconds::max() - at ? nanoseconds::max() : at + request.timeout;
  return permits;
}

std::vector<GoldenQuotaStatus> quota_status(const std::vector<stores::BucketStatus>& buckets) {
  if (buckets.size() != 1) return {};
  return golden_quotas(buckets.front().quotas);
}

stores::ThrottleRequest throttle_request(const GoldenThrottle& report) {
  return {.key = "golden", .sent_before = report.sent_before, .retry_after = report.retry_after};
}

std::vector<stores::PermitRequest> permit_requests(const std::vector<GoldenRequest>& keys,
                                                   nanoseconds origin) {
  std::vector<stores::PermitRequest> requests;
  for (const GoldenRequest& key : keys) requests.push_back(permit_request(key, origin));
  return requests;
}

// The core's arithmetic through stores::decide(), the step every store takes under its lock.
class CoreStore final : public GoldenStore {
 public:
  GoldenAnswer request(const GoldenRequest& request) override {
    if (!bucket_) {
      bucket_.emplace(request.params, request.at);
      schedule_ = {.timetable = request.timetable, .entry_until = request.entry_until};
      for (const QuotaParams& quota : request.quotas) quotas_.emplace_back(quota, request.at);
    }
    const stores::PermitRequest permits = permit_request(request, nanoseconds::zero());
    stores::Reservation reservation =
        stores::decide(*bucket_, schedule_, quotas_, permits, request.at, backoff_);
    stores::notice_followed(reservation, permits, noticed_);
    return golden_answer(reservation);
  }
  void set_rate(const GoldenSetRate& change) override {
    stores::change_rate(*bucket_, change.rate, change.at);
    schedule_ = {.timetable = change.timetable, .entry_until = change.entry_until};
    noticed_ = 0;
  }
  bool give_back(const GoldenGiveBack& unused,
                 const std::optional<stores::BookingSpan>& booked) override {
    return stores::give_back(*bucket_, unused.permits, unused.at, booked);
  }
  std::optional<stores::ThrottleResult> throttle(const GoldenThrottle& report) override {
    BucketState state = bucket_->state();
    const stores::ThrottleResult result = stores::record_throttle_report(
        backoff_, state, bucket_->params(), throttle_request(report), report.at);
    bucket_.emplace(bucket_->params(), state);
    return result;
  }
  std::vector<GoldenQuotaStatus> status(nanoseconds at) override {
    return quota_status({stores::describe("golden", *bucket_, schedule_, quotas_, at, backoff_)});
  }
  GoldenKeysAnswer request_all(const std::vector<GoldenRequest>& keys) override {
    const std::vector<stores::PermitRequest> requests = permit_requests(keys, nanoseconds::zero());
    std::vector<stores::KeyInCall> in_call;
    for (const stores::PermitRequest& request : requests) {
      const nanoseconds at = keys.front().at;
      auto [kept, made] =
          keys_.try_emplace(request.key, Key{TokenBucket(request.params, at), {}, {}});
      if (made)
        for (const QuotaParams& quota : request.quotas) kept->second.quotas.emplace_back(quota, at);
      in_call.push_back({.bucket = kept->second.bucket,
                         .schedule = kept->second.schedule,
                         .quotas = kept->second.quotas,
                         .request = request,
                         .backoff = kNeverThrottled});
    }
    return golden_keys_answer(stores::decide_all(in_call, keys.front().at));
  }

 private:
  struct Key {
    TokenBucket bucket;
    stores::KeySchedule schedule;
    std::vector<Quota> quotas;
  };
  std::map<std::string, Key> keys_;
  std::optional<TokenBucket> bucket_;
  BackoffState backoff_;
  stores::KeySchedule schedule_;
  std::vector<Quota> quotas_;
  std::uint64_t noticed_ = 0;
};

// The state-file store in a directory of its own, on a fake clock that the vector's times move.
class StateFileStore final : public GoldenStore {
 public:
  GoldenAnswer request(const GoldenRequest& request) override {
    move_to(request.at);
    return golden_answer(store_.reserve(permit_request(request, origin_), waiter_));
  }
  void set_rate(const GoldenSetRate& change) override {
    move_to(change.at);
    EXPECT_TRUE(store_.set_rate(
        {.key = "golden",
         .permits_per_second = change.rate,
         .schedule = {.timetable = change.timetable, .entry_until = change.entry_until}}));
  }
  bool give_back(const GoldenGiveBack& unused,
                 const std::optional<stores::BookingSpan>& booked) override {
    move_to(unused.at);
    return store_.give_back({.key = "golden", .permits = unused.permits, .booked = booked});
  }
  std::optional<stores::ThrottleResult> throttle(const GoldenThrottle& report) override {
    move_to(report.at);
    return store_.throttle(throttle_request(report));
  }
  std::vector<GoldenQuotaStatus> status(nanoseconds at) override {
    move_to(at);
    return quota_status(store_.status("golden"));
  }
  GoldenKeysAnswer request_all(const std::vector<GoldenRequest>& keys) override {
    move_to(keys.front().at);
    return golden_keys_answer(store_.reserve_all(permit_requests(keys, origin_), waiter_));
  }

 private:
  void move_to(nanoseconds at) { clock_.advance(origin_ + at - clock_.now()); }
  // Quota slots are counted from the vectors' t=0 (their header): a whole day from the fake
  // clock's origin is a multiple of every slot length they use.
  static nanoseconds aligned_origin(FakeClock& clock) {
    constexpr nanoseconds kDay = std::chrono::hours(24);
    clock.advance(kDay - clock.now());
    return clock.now();
  }

  TempDir dir_;
  FakeClock clock_;
  FakeWaiter waiter_{clock_};
  const nanoseconds origin_ = aligned_origin(clock_);
  stores::state_file::Store store_{
      state::StateDirectory::open(dir_.string()), clock_,
      stores::state_file::HostId{.machine_id = "0123456789abcdef0123456789abcdef",
                                 .boot_id = "11111111-2222-3333-4444-555555555555"},
      [](const std::string&) {}};
};

std::vector<GoldenVector> golden_vectors() { return read_golden_vectors(RATELIMIT_GOLDEN_VECTORS); }

TEST(GoldenVectors, FileCoversEveryKindOfStep) {
  const std::vector<GoldenVector> vectors = golden_vectors();
  ASSERT_GE(vectors.size(), 10u);
  bool refusal = false, set_rate = false, give_back = false, warming_up = false,
       kept_params = false, several_quotas = false, quota_refusal = false, quota_status = false,
       throttle = false;
  for (const GoldenVector& vector : vectors) {
    for (const GoldenStep& step : vector.steps) {
      set_rate |= step.set_rate.has_value();
      give_back |= step.give_back.has_value();
      throttle |= step.throttle.has_value();
      quota_status |= step.status && !step.status->quotas.empty();
      if (!step.request) continue;
      refusal |= step.request->granted == false;
      warming_up |= step.request->params.shape == BucketShape::warming_up;
      kept_params |= !step.request->apply_params;
      several_quotas |= step.request->quotas.size() > 1;
      quota_refusal |= !step.request->quotas.empty() && step.request->granted == false;
    }
  }
  EXPECT_TRUE(refusal && set_rate && give_back && warming_up && kept_params);
  EXPECT_TRUE(several_quotas && quota_refusal && quota_status && throttle);
}

TEST(GoldenVectors, CoreReachesEveryExpectedDecision) {
  for (const GoldenVector& vector : golden_vectors()) {
    CoreStore store;
    for (const std::string& mismatch : replay(vector, store)) ADD_FAILURE() << mismatch;
  }
}

TEST(GoldenVectors, StateFileReachesEveryExpectedDecision) {
  for (const GoldenVector& vector : golden_vectors()) {
    StateFileStore store;
    for (const std::string& mismatch : replay(vector, store)) ADD_FAILURE() << mismatch;
  }
}

}  // namespace
}  // namespace ratelimit::testing
