#include "golden_vectors.hpp"

#include <gtest/gtest.h>

#include <optional>

#include "backends/bucket_backend.hpp"

namespace ratelimit::testing {
namespace {

// The core's arithmetic through backends::decide(), the step every store takes under its lock.
class CoreStore final : public GoldenStore {
 public:
  GoldenAnswer request(const GoldenRequest& request) override {
    if (!bucket_) bucket_.emplace(request.params, request.at);
    backends::PermitRequest permits;
    permits.key = "golden";
    permits.params = request.params;
    permits.apply_params = request.apply_params;
    permits.permits = request.permits;
    permits.timeout = request.timeout;
    const backends::Reservation reservation = backends::decide(*bucket_, permits, request.at);
    return {.granted = reservation.granted, .wait = reservation.wait};
  }
  void set_rate(const GoldenSetRate& change) override { bucket_->set_rate(change.rate, change.at); }

 private:
  std::optional<TokenBucket> bucket_;
};

std::vector<GoldenVector> golden_vectors() { return read_golden_vectors(RATELIMIT_GOLDEN_VECTORS); }

TEST(GoldenVectors, FileCoversEveryKindOfStep) {
  const std::vector<GoldenVector> vectors = golden_vectors();
  ASSERT_GE(vectors.size(), 10u);
  bool refusal = false, set_rate = false, warming_up = false, kept_params = false;
  for (const GoldenVector& vector : vectors) {
    for (const GoldenStep& step : vector.steps) {
      set_rate |= step.set_rate.has_value();
      if (!step.request) continue;
      refusal |= step.request->granted == false;
      warming_up |= step.request->params.shape == BucketShape::warming_up;
      kept_params |= !step.request->apply_params;
    }
  }
  EXPECT_TRUE(refusal && set_rate && warming_up && kept_params);
}

TEST(GoldenVectors, CoreReachesEveryExpectedDecision) {
  for (const GoldenVector& vector : golden_vectors()) {
    CoreStore store;
    for (const std::string& mismatch : replay(vector, store)) ADD_FAILURE() << mismatch;
  }
}

}  // namespace
}  // namespace ratelimit::testing
