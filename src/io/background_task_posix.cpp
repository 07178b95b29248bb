#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "io/background_task.hpp"
#include "io/posix.hpp"

namespace ratelimit::io {
namespace {

// The monotonic clock, and waits that end when `stop` becomes readable.
class StoppableWaiter final : public Waiter {
 public:
  explicit StoppableWaiter(int stop) : stop_(stop) {}
  std::chrono::nanoseconds now() override { return monotonic_now(); }
  int wait_until(std::chrono::nanoseconds deadline, std::span<pollfd> fds) override {
    std::vector<pollfd> watched(fds.begin(), fds.end());
    watched.push_back({.fd = stop_, .events = POLLIN, .revents = 0});
    while (true) {
      timespec timeout{};
      if (::ppoll(watched.data(), watched.size(), time_left_for_ppoll(deadline, timeout),
                  nullptr) >= 0)
        break;
      if (errno != EINTR) throw_errno("poll");
    }
    std::copy(watched.begin(), watched.end() - 1, fds.begin());
    return watched.back().revents != 0 ? SIGTERM : 0;
  }

 private:
  int stop_;
};

class ThreadTask final : public BackgroundTask {
 public:
  explicit ThreadTask(std::function<void(Waiter&)> work)
      : stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!stop_) throw_errno("eventfd");
    // Blocked in the new thread from its first instruction: the mask is inherited.
    sigset_t all;
    ::sigfillset(&all);
    const BlockedSignals blocked(all);
    thread_ = std::thread([this, work = std::move(work)] {
      StoppableWaiter waiter(stop_.get());
      try {
        work(waiter);
      } catch (...) {
      }
      done_.store(true, std::memory_order_release);
    });
  }
  ~ThreadTask() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written =
        retry_on_eintr([&] { return ::write(stop_.get(), &one, sizeof one); });
    thread_.join();
  }
  ThreadTask(const ThreadTask&) = delete;
  ThreadTask& operator=(const ThreadTask&) = delete;

  bool done() const override { return done_.load(std::memory_order_acquire); }

 private:
  FileDescriptor stop_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace

std::unique_ptr<BackgroundTask> run_in_background(std::function<void(Waiter&)> work) {
  return std::make_unique<ThreadTask>(std::move(work));
}

}  // namespace ratelimit::io
