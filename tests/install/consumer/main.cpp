// A project outside the tree, built against the installed package.
#include <cstdio>
#include <ratelimit/rate_limiter.hpp>

int main() {
  auto limiter = ratelimit::RateLimiter::bursty(1000.0);
  limiter.acquire();
  const auto wait = limiter.reserve(1);
  // The first permit is free and its cost, 1 ms, is paid by the second.
  const bool guava_wait =
      wait > std::chrono::nanoseconds::zero() && wait <= std::chrono::milliseconds(1);
  std::printf("rate %.0f, second permit %s\n", limiter.rate(),
              guava_wait ? "waits" : "does not wait");
  return guava_wait ? 0 : 1;
}
