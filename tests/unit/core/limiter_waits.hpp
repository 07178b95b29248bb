#pragma once

#include <chrono>
#include <vector>

#include "ratelimit/rate_limiter.hpp"

namespace ratelimit::testing {

using Waits = std::vector<std::chrono::nanoseconds>;

// Waits of `count` consecutive acquire(1) calls.
inline Waits acquire_each(RateLimiter& limiter, int count) {
  Waits waits;
  for (int i = 0; i < count; ++i) waits.push_back(limiter.acquire());
  return waits;
}

}  // namespace ratelimit::testing
