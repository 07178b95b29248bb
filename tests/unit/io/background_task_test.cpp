#include "io/background_task.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "io/posix.hpp"

// Runs under ThreadSanitizer (label "threaded"): the store's probe reads and writes from a thread
// of its own while the pipe goes on.
namespace ratelimit::io {
namespace {

using namespace std::chrono_literals;

void wait_for(const BackgroundTask& task) {
  const auto give_up = monotonic_now() + 10s;
  while (!task.done() && monotonic_now() < give_up) std::this_thread::sleep_for(1ms);
}

TEST(BackgroundTask, WhatTheWorkLeftIsReadOnceItIsDone) {
  int found = 0;  // plain memory: done() is what orders the two threads
  const auto task = run_in_background([&found](Waiter&) { found = 42; });
  wait_for(*task);
  ASSERT_TRUE(task->done());
  EXPECT_EQ(found, 42);
}

TEST(BackgroundTask, WorkThatThrowsIsDoneAndTheThrowIsDropped) {
  const auto task = run_in_background([](Waiter&) { throw std::runtime_error("unreachable"); });
  wait_for(*task);
  EXPECT_TRUE(task->done());
}

TEST(BackgroundTask, DroppingTheTaskEndsAWaitAtOnceAsAStopSignalWould) {
  std::atomic<int> signal{-1};
  auto task = run_in_background([&signal](Waiter& waiter) {
    signal = waiter.wait_until(waiter.now() + std::chrono::hours(1));
  });
  const auto start = monotonic_now();
  task.reset();
  EXPECT_LT(monotonic_now() - start, 5s);
  EXPECT_NE(signal.load(), 0);
}

}  // namespace
}  // namespace ratelimit::io
