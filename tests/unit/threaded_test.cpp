// Run under ThreadSanitizer by scripts/test.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_clock.hpp"
#include "ratelimit/rate_limiter.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

// With the clock standing still, n permits can only be granted at 0, 1/rate, ..., (n-1)/rate:
// a lost update under contention would grant two permits at the same moment.
TEST(Threaded, ConcurrentReservationsNeverExceedTheRate) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  testing::FakeClock clock;
  auto limiter = RateLimiter::bursty(1000.0, clock);
  std::mutex mutex;
  std::vector<nanoseconds> waits;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        std::vector<nanoseconds> mine;
        for (int i = 0; i < kPerThread; ++i) mine.push_back(limiter.reserve(1));
        std::lock_guard lock(mutex);
        waits.insert(waits.end(), mine.begin(), mine.end());
      });
    }
  }
  std::sort(waits.begin(), waits.end());
  ASSERT_EQ(waits.size(), std::size_t{kThreads * kPerThread});
  for (std::size_t i = 0; i < waits.size(); ++i) ASSERT_EQ(waits[i], i * 1ms);
}

// set_rate takes the same lock: reconfiguring to the same rate under contention changes nothing.
TEST(Threaded, RateChangesDuringReservations) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1000;
  testing::FakeClock clock;
  auto limiter = RateLimiter::bursty(100.0, clock);
  std::mutex mutex;
  std::vector<nanoseconds> waits;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kPerThread; ++i) {
          const nanoseconds wait = limiter.reserve(1);
          std::lock_guard lock(mutex);
          waits.push_back(wait);
        }
      });
    }
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) limiter.set_rate(100.0);
    });
  }
  std::sort(waits.begin(), waits.end());
  for (std::size_t i = 0; i < waits.size(); ++i) ASSERT_EQ(waits[i], i * 10ms);
}

}  // namespace
}  // namespace ratelimit
