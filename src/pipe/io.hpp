#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>

#include "control/new_rate.hpp"

namespace ratelimit::pipe {

// Why a wait ended.
enum class Wake {
  ready,    // what the wait was for besides the deadline happened
  timeout,  // the deadline passed
  control,  // a new rate or timetable arrived: take it with take_new_rate()
  stop,     // a stop signal arrived: take it with stop_signal()
};

// What besides its deadline a wait is for.
enum class WaitFor {
  deadline,   // nothing
  input,      // the input can be read (or is at its end) without blocking
  input_end,  // the input turns out to hold nothing more: input_exhausted()
};

// What one read or splice moved.
struct Moved {
  std::size_t bytes = 0;
  bool end_of_input = false;
  bool output_closed = false;
};

// The engine's whole view of the outside world: the input (the FILEs in order), the output, the
// monotonic clock with waits that a signal or a control message can cut short. The real one is
// file descriptors and ppoll (files_posix.cpp); the engine's unit tests use memory and a fake
// clock, so they can assert the exact time of every write.
class Io {
 public:
  virtual ~Io() = default;

  virtual std::chrono::nanoseconds now() = 0;
  // Waits until `deadline` (nanoseconds::max(): no limit) or what `what` names; a stop signal or
  // a control message ends any wait.
  virtual Wake wait(std::chrono::nanoseconds deadline, WaitFor what) = 0;
  // True when the input is known to hold nothing more: its writer has gone and what it left has
  // been moved, so the next splice finds the end without blocking.
  virtual bool input_exhausted() const = 0;
  // The bytes of this input that a read or splice moves now without waiting: the rest of a
  // regular file, what a pipe holds (all that is left once its last writer has closed, which the
  // pipe is asked now), what a socket or a terminal holds (nothing, once a wait for input said
  // ready: its end). None when the input cannot say (another device).
  virtual std::optional<std::size_t> bytes_ready() = 0;
  // True when the bytes of this input left to move are known: the rest of a regular file, what
  // a pipe holds once its last writer was seen to close; bytes_ready() then says them.
  virtual bool input_end_known() const { return false; }
  // True when a read would not block now, whatever signal has come.
  virtual bool input_ready_now() = 0;
  // Reads up to buffer.size() bytes after wait() or input_ready_now() said ready. Zero bytes
  // without end_of_input: one input ended and the next is not ready yet, wait again.
  virtual Moved read(std::span<char> buffer) = 0;
  // True when the current input takes back what was read from it (a file, whose offset moves
  // back): the engine then reads ahead in large reads, one per many writes, and a stop or a
  // failure gives back what is not due (unread()).
  virtual bool input_takes_back() const { return false; }
  // Gives the last `bytes` read back to the input, so that its next reader (a command after this
  // one on the same standard input) gets them first; false, and nothing given back, when the input
  // cannot take them back (a pipe, a terminal, an input already ended).
  virtual bool unread(std::size_t /*bytes*/) { return false; }
  // Writes some of `data` (at least one byte, blocking while the output is full); 0 when a stop
  // signal arrived while it blocked, before any byte went; nullopt when downstream has closed.
  virtual std::optional<std::size_t> write(std::span<const char> data) = 0;
  // Moves up to `max_bytes` from input to output without copying them through user space. Never
  // blocks on an empty input: zero bytes without end_of_input then, and the caller waits for
  // input. nullopt when splicing is impossible for these descriptors, and then nothing moved.
  virtual std::optional<Moved> splice(std::size_t max_bytes) = 0;
  // What `ratelimit set` sent last, once per message.
  virtual std::optional<control::NewRate> take_new_rate() = 0;
  // The stop signal that ended a wait, e.g. SIGINT.
  virtual int stop_signal() const = 0;
};

}  // namespace ratelimit::pipe
