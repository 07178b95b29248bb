// Cost of the core's calls on the real clock, at a rate high enough that nobody sleeps.
#include <benchmark/benchmark.h>

#include <limits>

#include "ratelimit/quota.hpp"
#include "ratelimit/rate_limiter.hpp"

namespace {

ratelimit::RateLimiter& shared_limiter() {
  static auto limiter = ratelimit::RateLimiter::bursty(std::numeric_limits<double>::infinity());
  return limiter;
}

void BM_Reserve(benchmark::State& state) {
  auto& limiter = shared_limiter();
  for (auto _ : state) benchmark::DoNotOptimize(limiter.reserve(1));
}
BENCHMARK(BM_Reserve)->Threads(1)->Threads(2)->UseRealTime();

void BM_Acquire(benchmark::State& state) {
  auto& limiter = shared_limiter();
  for (auto _ : state) benchmark::DoNotOptimize(limiter.acquire(1));
}
BENCHMARK(BM_Acquire)->Threads(1)->Threads(2)->UseRealTime();

// A finite rate exercises the whole arithmetic (refill, rescale-free path, wait computation);
// the returned waits are never slept.
void BM_ReserveFiniteRate(benchmark::State& state) {
  static auto limiter = ratelimit::RateLimiter::bursty(1e9);
  for (auto _ : state) benchmark::DoNotOptimize(limiter.reserve(1));
}
BENCHMARK(BM_ReserveFiniteRate)->Threads(1)->Threads(2)->UseRealTime();

void BM_ReserveWarmingUp(benchmark::State& state) {
  static auto limiter = ratelimit::RateLimiter::warming_up(1e9, std::chrono::seconds(10));
  for (auto _ : state) benchmark::DoNotOptimize(limiter.reserve(1));
}
BENCHMARK(BM_ReserveWarmingUp)->Threads(1)->Threads(2)->UseRealTime();

// One decision of a token bucket with 0, 1 or 4 quotas (QuotaBucket::reserve, what a store does
// under its lock), 1 us apart on a timeline of its own: the quotas never hold, so every slot is
// looked at as a request that goes at once makes it. Their limit is the largest a quota takes
// (2^53 - 1, below which counts are exact).
void BM_QuotaDecision(benchmark::State& state) {
  using std::chrono::nanoseconds;
  ratelimit::BucketParams rate;
  rate.permits_per_second = 1e9;
  std::vector<ratelimit::Quota> quotas;
  for (int i = 0; i < state.range(0); ++i)
    quotas.emplace_back(ratelimit::QuotaParams{.limit = (std::int64_t{1} << 53) - 1,
                                               .period = std::chrono::hours(1 + i)},
                        nanoseconds::zero());
  ratelimit::QuotaBucket bucket(ratelimit::TokenBucket(rate, nanoseconds::zero()), quotas);
  nanoseconds now{0};
  for (auto _ : state) {
    now += std::chrono::microseconds(1);
    benchmark::DoNotOptimize(bucket.reserve(1, now));
  }
}
BENCHMARK(BM_QuotaDecision)->Arg(0)->Arg(1)->Arg(4);

}  // namespace
