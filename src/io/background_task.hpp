#pragma once

#include <functional>
#include <memory>

#include "io/waiter.hpp"

namespace ratelimit::io {

// Work run beside the main thread, which must never wait for it: asking a store that went away
// whether it answers again, while the run goes on without it.
class BackgroundTask {
 public:
  virtual ~BackgroundTask() = default;
  // Whether the work has returned (or thrown). What it left behind may be read once it has.
  virtual bool done() const = 0;
};

// Starts `work` on a thread of its own, with every signal blocked there (the stop signals still
// arrive where the main thread waits for them) and a Waiter on the monotonic clock whose waits
// return at once, as if SIGTERM had come, when the returned task is dropped. Dropping it waits for
// `work` to return: work that only waits through the Waiter returns at once. What `work` throws
// is dropped: it says what it found through what it captured.
std::unique_ptr<BackgroundTask> run_in_background(std::function<void(Waiter&)> work);

}  // namespace ratelimit::io
