#pragma once

// The POSIX layer's small RAII types. Every system call of the engines goes through here or
// another *_posix.cpp file, so EINTR and errno handling live in one place.

#include <poll.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace ratelimit::io {

// Retries `call` while it fails with EINTR; returns its last result.
template <typename Call>
auto retry_on_eintr(Call call) {
  decltype(call()) result;
  do {
    result = call();
  } while (result == -1 && errno == EINTR);
  return result;
}

// Throws std::system_error for the current errno, e.g. "write standard output: Broken pipe".
[[noreturn]] void throw_errno(const std::string& what);

// Puts /dev/null, close-on-exec, on each of descriptors 0-2 that is closed, so that no descriptor
// opened later takes a standard stream's number (a FIFO or a lock file read or written as one). A
// command run by exec still finds them closed. Call once, first thing in main().
void reserve_standard_streams();
// True when `fd` (0-2) was closed when the process started: using it fails with EBADF, as cat's
// would.
bool standard_stream_was_closed(int fd);

// A move-only owner of a file descriptor; -1 means none.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() noexcept;
  void reset() noexcept;

 private:
  int fd_ = -1;
};

// Makes the regular file `fd` hold `bytes` from its start: one pwrite, and a truncation only when
// the file held more (`held` bytes). Throws std::system_error.
void rewrite_from_start(const FileDescriptor& fd, std::string_view bytes, std::size_t held);

// The width in columns of the terminal `fd` is, asked anew each time so that a resized window
// (SIGWINCH) is followed; nullopt when `fd` is not a terminal.
std::optional<int> terminal_width(int fd);

// The monotonic clock that deadlines are written on (CLOCK_MONOTONIC, as std::steady_clock and
// ratelimit::system_clock()).
std::chrono::nanoseconds monotonic_now();

// The time left until `deadline` (monotonic_now() timeline) as ppoll takes it, written into
// `storage`: no time left is zero, and nanoseconds::max() is nullptr (no end).
timespec* time_left_for_ppoll(std::chrono::nanoseconds deadline, timespec& storage);

// The stop signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT.
sigset_t stop_signal_set();

// While alive, `signals` are blocked in this thread (added to its mask); the destructor puts back
// the mask it found. One place for the save, block and restore that every guard of a signal needs.
class BlockedSignals {
 public:
  explicit BlockedSignals(const sigset_t& signals);
  ~BlockedSignals() { restore(); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  // The mask found: what it was before, and is again after.
  const sigset_t& previous() const { return previous_; }
  // Puts back the mask found now, e.g. in a forked child before exec (the destructor does it
  // again, harmlessly).
  void restore() const;

 private:
  sigset_t previous_;
};

// While alive, SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked and their handlers only record the
// signal (SIGQUIT too: its core dump would lose what was read and not yet written);
// they are let through only inside wait_until() and write_unless_stopped(), so every interruption
// arrives at a known place.
// Those that were ignored stay ignored. The destructor restores the previous handlers and mask.
class SignalGuard {
 public:
  static constexpr std::size_t kStopSignalCount = 4;

  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

  // The first stop signal received, or 0.
  int received() const;
  // How many stop signals have arrived: a caller notes it, then asks for a newer one.
  int count() const;

  // Waits until `deadline` (monotonic_now() timeline), until one of `fds` is ready, or until a
  // stop signal newer than `seen` (a count()) arrives. Returns the number of ready descriptors (0
  // at the deadline or on a signal). A deadline of nanoseconds::max() waits without limit.
  int wait_until(std::chrono::nanoseconds deadline, pollfd* fds = nullptr, nfds_t count = 0,
                 int seen = 0);

  // write(2) with the stop signals let in, so that one arriving while it blocks on a full pipe
  // cuts it short. -1 with EINTR when a stop signal newer than `seen` (a count()) came before
  // any byte was written; otherwise what write(2) returns.
  ssize_t write_unless_stopped(int fd, const void* data, std::size_t size, int seen);

 private:
  // The caller's mask without the stop signals: the mask while waiting.
  sigset_t waiting_mask() const;

  // Restored after the handlers, by its destructor.
  const BlockedSignals blocked_;
  struct sigaction previous_actions_[kStopSignalCount];
};

}  // namespace ratelimit::io
