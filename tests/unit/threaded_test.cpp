// Run under ThreadSanitizer by scripts/test.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_clock.hpp"
#include "ratelimit/rate_limiter.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

// `threads` threads reserve one permit `per_thread` times each while `meanwhile` runs in one more
// thread; returns every wait, sorted.
std::vector<nanoseconds> concurrent_waits(RateLimiter& limiter, int threads, int per_thread,
                                          const std::function<void()>& meanwhile) {
  std::mutex mutex;
  std::vector<nanoseconds> waits;
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        std::vector<nanoseconds> mine;
        for (int i = 0; i < per_thread; ++i) mine.push_back(limiter.reserve(1));
        std::lock_guard lock(mutex);
        waits.insert(waits.end(), mine.begin(), mine.end());
      });
    }
    workers.emplace_back(meanwhile);
  }
  std::sort(waits.begin(), waits.end());
  return waits;
}

// With the clock standing still, n permits can only be granted at 0, 1/rate, ..., (n-1)/rate:
// a lost update under contention would grant two permits at the same moment.
TEST(Threaded, ConcurrentReservationsNeverExceedTheRate) {
  testing::FakeClock clock;
  auto limiter = RateLimiter::bursty(1000.0, clock);
  const auto waits = concurrent_waits(limiter, 8, 2000, [] {});
  ASSERT_EQ(waits.size(), 16000u);
  for (std::size_t i = 0; i < waits.size(); ++i) ASSERT_EQ(waits[i], i * 1ms);
}

// set_rate takes the same lock: reconfiguring to the same rate under contention changes nothing.
TEST(Threaded, RateChangesDuringReservations) {
  testing::FakeClock clock;
  auto limiter = RateLimiter::bursty(100.0, clock);
  const auto waits = concurrent_waits(limiter, 4, 1000, [&] {
    for (int i = 0; i < 1000; ++i) limiter.set_rate(100.0);
  });
  ASSERT_EQ(waits.size(), 4000u);
  for (std::size_t i = 0; i < waits.size(); ++i) ASSERT_EQ(waits[i], i * 10ms);
}

}  // namespace
}  // namespace ratelimit
