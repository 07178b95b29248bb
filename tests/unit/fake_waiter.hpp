#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <optional>
#include <vector>

#include "fake_clock.hpp"
#include "io/waiter.hpp"

namespace ratelimit::testing {

// Waits move the fake clock to their deadline and are recorded; a signal can be set to arrive
// during a given wait (it then stays received, as SignalGuard's).
class FakeWaiter final : public io::Waiter {
 public:
  explicit FakeWaiter(FakeClock& clock) : clock_(clock) {}
  std::chrono::nanoseconds now() override { return clock_.now(); }
  int wait_until(std::chrono::nanoseconds deadline, std::span<pollfd> = {}) override {
    if (received != 0) return received;
    if (on_wait) on_wait();
    waits.push_back(deadline - clock_.now());
    if (signal_during_wait && *signal_during_wait == waits.size()) return received = SIGINT;
    clock_.advance(std::max(deadline - clock_.now(), std::chrono::nanoseconds::zero()));
    return 0;
  }

  std::vector<std::chrono::nanoseconds> waits;
  std::optional<std::size_t> signal_during_wait;  // 1 for the first wait
  int received = 0;
  std::function<void()> on_wait;  // called as each wait begins, to look at what lasts during it

 private:
  FakeClock& clock_;
};

}  // namespace ratelimit::testing
