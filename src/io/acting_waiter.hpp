#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <span>
#include <utility>

#include "io/waiter.hpp"

namespace ratelimit::io {

// A waiter that does what falls due while a wait lasts: at the time `next_due` names, it calls
// `act` and waits on, until the wait itself ends. So a thread that waits for one thing (a reply)
// still answers, each at its own time, those that stop waiting for it sooner (callers whose
// deadlines come first). `act` must make `next_due` later.
class ActingWaiter final : public Waiter {
 public:
  ActingWaiter(Waiter& inner, std::function<std::chrono::nanoseconds()> next_due,
               std::function<void()> act)
      : inner_(inner), next_due_(std::move(next_due)), act_(std::move(act)) {}

  std::chrono::nanoseconds now() override { return inner_.now(); }

  int wait_until(std::chrono::nanoseconds deadline, std::span<pollfd> fds = {}) override {
    while (true) {
      for (pollfd& fd : fds) fd.revents = 0;
      const int signal = inner_.wait_until(std::min(next_due_(), deadline), fds);
      if (signal != 0) return signal;
      if (std::any_of(fds.begin(), fds.end(), [](const pollfd& fd) { return fd.revents != 0; }))
        return 0;
      const std::chrono::nanoseconds now = inner_.now();
      if (now >= next_due_()) act_();
      if (now >= deadline) return 0;
    }
  }

 private:
  Waiter& inner_;
  std::function<std::chrono::nanoseconds()> next_due_;
  std::function<void()> act_;
};

}  // namespace ratelimit::io
