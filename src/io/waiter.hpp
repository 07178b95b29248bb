#pragma once

#include <poll.h>

#include <chrono>
#include <span>

#include "io/posix.hpp"

namespace ratelimit::io {

// The timeline that deadlines are written on and a wait that a stop signal cuts short: what a
// call to a shared store (a lock, a round trip) and an admission wait on. SignalWaiter is the real
// one; unit tests use a fake on a fake clock.
class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual std::chrono::nanoseconds now() = 0;
  // Waits until `deadline` (nanoseconds::max(): no limit) or until one of `fds` is ready. Returns
  // the stop signal that ended the wait, or came before it; 0 otherwise.
  virtual int wait_until(std::chrono::nanoseconds deadline, std::span<pollfd> fds = {}) = 0;
};

// monotonic_now() and the SignalGuard's wait. The guard must outlive it.
class SignalWaiter final : public Waiter {
 public:
  explicit SignalWaiter(SignalGuard& guard) : guard_(guard) {}
  std::chrono::nanoseconds now() override;
  int wait_until(std::chrono::nanoseconds deadline, std::span<pollfd> fds = {}) override;

 private:
  SignalGuard& guard_;
};

// The monotonic clock and a poll that no signal cuts short, for Redis commands sent without a stop
// waiter: status, reset and set run with the stop signals' default action, which ends the process
// at once anyway.
class UninterruptedWaiter final : public Waiter {
 public:
  std::chrono::nanoseconds now() override;
  int wait_until(std::chrono::nanoseconds deadline, std::span<pollfd> fds = {}) override;
};

}  // namespace ratelimit::io
