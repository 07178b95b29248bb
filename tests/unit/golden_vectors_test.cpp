#include "golden_vectors.hpp"

#include <gtest/gtest.h>

#include <optional>

#include "backends/bucket_backend.hpp"
#include "backends/state_file/state_file_backend.hpp"
#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "temp_dir.hpp"

namespace ratelimit::testing {
namespace {

using std::chrono::nanoseconds;

// The request a vector's line makes of a store whose timeline is the vector's moved by `origin`.
backends::PermitRequest permit_request(const GoldenRequest& request, nanoseconds origin) {
  backends::PermitRequest permits;
  permits.key = "golden";
  permits.params = request.params;
  permits.apply_params = request.apply_params;
  permits.schedule = {.timetable = request.timetable, .entry_until = request.entry_until};
  permits.permits = request.permits;
  const nanoseconds at = origin + request.at;
  if (request.timeout != nanoseconds::max())
    permits.deadline =
        request.timeout > nanoseconds::max() - at ? nanoseconds::max() : at + request.timeout;
  return permits;
}

GoldenAnswer answer(const backends::Reservation& reservation) {
  return {.granted = reservation.granted,
          .wait = reservation.wait,
          .replaced = reservation.replaced_params.has_value(),
          .key_timetable = reservation.key_timetable,
          .booked = reservation.booked};
}

// The core's arithmetic through backends::decide(), the step every store takes under its lock.
class CoreStore final : public GoldenStore {
 public:
  GoldenAnswer request(const GoldenRequest& request) override {
    if (!bucket_) {
      bucket_.emplace(request.params, request.at);
      schedule_ = {.timetable = request.timetable, .entry_until = request.entry_until};
    }
    return answer(backends::decide(*bucket_, schedule_, quotas_,
                                   permit_request(request, nanoseconds::zero()), request.at));
  }
  void set_rate(const GoldenSetRate& change) override {
    backends::change_rate(*bucket_, change.rate, change.at);
    schedule_ = {.timetable = change.timetable, .entry_until = change.entry_until};
  }
  bool give_back(const GoldenGiveBack& unused,
                 const std::optional<backends::BookingSpan>& booked) override {
    return backends::give_back(*bucket_, unused.permits, unused.at, booked);
  }

 private:
  std::optional<TokenBucket> bucket_;
  backends::KeySchedule schedule_;
  std::vector<Quota> quotas_;
};

// The state-file backend in a directory of its own, on a fake clock that the vector's times move.
class StateFileStore final : public GoldenStore {
 public:
  GoldenAnswer request(const GoldenRequest& request) override {
    move_to(request.at);
    return answer(backend_.reserve(permit_request(request, origin_), waiter_));
  }
  void set_rate(const GoldenSetRate& change) override {
    move_to(change.at);
    EXPECT_TRUE(backend_.set_rate(
        "golden", change.rate, {.timetable = change.timetable, .entry_until = change.entry_until}));
  }
  bool give_back(const GoldenGiveBack& unused,
                 const std::optional<backends::BookingSpan>& booked) override {
    move_to(unused.at);
    return backend_.give_back("golden", unused.permits, booked);
  }

 private:
  void move_to(nanoseconds at) { clock_.advance(origin_ + at - clock_.now()); }

  TempDir dir_;
  FakeClock clock_;
  FakeWaiter waiter_{clock_};
  const nanoseconds origin_ = clock_.now();
  backends::StateFileBackend backend_{
      backends::StateDirectory::open(dir_.string()), clock_,
      backends::HostId{.machine_id = "0123456789abcdef0123456789abcdef",
                       .boot_id = "11111111-2222-3333-4444-555555555555"}};
};

std::vector<GoldenVector> golden_vectors() { return read_golden_vectors(RATELIMIT_GOLDEN_VECTORS); }

TEST(GoldenVectors, FileCoversEveryKindOfStep) {
  const std::vector<GoldenVector> vectors = golden_vectors();
  ASSERT_GE(vectors.size(), 10u);
  bool refusal = false, set_rate = false, give_back = false, warming_up = false,
       kept_params = false;
  for (const GoldenVector& vector : vectors) {
    for (const GoldenStep& step : vector.steps) {
      set_rate |= step.set_rate.has_value();
      give_back |= step.give_back.has_value();
      if (!step.request) continue;
      refusal |= step.request->granted == false;
      warming_up |= step.request->params.shape == BucketShape::warming_up;
      kept_params |= !step.request->apply_params;
    }
  }
  EXPECT_TRUE(refusal && set_rate && give_back && warming_up && kept_params);
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
