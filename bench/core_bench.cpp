// Cost of the core's calls on the real clock, at a rate high enough that nobody sleeps.
#include <benchmark/benchmark.h>

#include <limits>

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

}  // namespace
