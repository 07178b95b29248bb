#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "io/posix.hpp"
#include "io/waiter.hpp"

namespace ratelimit::io {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static_assert(std::size(kStopSignals) == SignalGuard::kStopSignalCount);

// Written only by the handler, which the other stop signals cannot interrupt; async-signal-safe
// by construction.
volatile std::sig_atomic_t g_received_signal = 0;
volatile std::sig_atomic_t g_stop_count = 0;

extern "C" void record_signal(int signal_number) {
  if (g_received_signal == 0) g_received_signal = signal_number;
  g_stop_count = g_stop_count + 1;
}

bool g_standard_stream_closed[3] = {false, false, false};

}  // namespace

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal_number : kStopSignals) sigaddset(&set, signal_number);
  return set;
}

void reserve_standard_streams() {
  for (int fd = 0; fd < 3; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    // open() returns the lowest free number: this one, since the lower ones are open by now.
    ::open("/dev/null", O_RDWR | O_CLOEXEC);
    g_standard_stream_closed[fd] = true;
  }
}

bool standard_stream_was_closed(int fd) {
  return fd >= 0 && fd < 3 && g_standard_stream_closed[fd];
}

void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int FileDescriptor::release() noexcept { return std::exchange(fd_, -1); }

void FileDescriptor::reset() noexcept {
  // close() is not retried on EINTR: on Linux the descriptor is released either way.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void rewrite_from_start(const FileDescriptor& fd, std::string_view bytes, std::size_t held) {
  const ssize_t count =
      retry_on_eintr([&] { return ::pwrite(fd.get(), bytes.data(), bytes.size(), 0); });
  if (count < 0) throw_errno("rewrite");
  if (static_cast<std::size_t>(count) != bytes.size())
    throw std::system_error(ENOSPC, std::generic_category(), "rewrite");
  if (held > bytes.size() &&
      retry_on_eintr([&] { return ::ftruncate(fd.get(), static_cast<off_t>(bytes.size())); }) != 0)
    throw_errno("rewrite");
}

std::optional<int> terminal_width(int fd) {
  struct winsize size {};
  if (::ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return std::nullopt;
  return size.ws_col;
}

timespec* time_left_for_ppoll(std::chrono::nanoseconds deadline, timespec& storage) {
  if (deadline == std::chrono::nanoseconds::max()) return nullptr;
  const auto remaining = std::max(deadline - monotonic_now(), std::chrono::nanoseconds::zero());
  storage.tv_sec = static_cast<time_t>(remaining.count() / 1'000'000'000);
  storage.tv_nsec = static_cast<long>(remaining.count() % 1'000'000'000);
  return &storage;
}

std::chrono::nanoseconds monotonic_now() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

BlockedSignals::BlockedSignals(const sigset_t& signals) {
  ::pthread_sigmask(SIG_BLOCK, &signals, &previous_);
}

void BlockedSignals::restore() const { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

SignalGuard::SignalGuard() : blocked_(stop_signal_set()) {
  g_received_signal = 0;
  g_stop_count = 0;
  const sigset_t stop = stop_signal_set();
  struct sigaction action {};
  action.sa_handler = record_signal;
  action.sa_mask = stop;
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
    ::sigaction(kStopSignals[i], nullptr, &previous_actions_[i]);
    // A signal the caller chose to ignore (nohup, a shell's background job) stays ignored.
    if (previous_actions_[i].sa_handler != SIG_IGN) ::sigaction(kStopSignals[i], &action, nullptr);
  }
}

SignalGuard::~SignalGuard() {
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i)
    ::sigaction(kStopSignals[i], &previous_actions_[i], nullptr);
}

int SignalGuard::received() const { return g_received_signal; }

int SignalGuard::count() const { return g_stop_count; }

sigset_t SignalGuard::waiting_mask() const {
  sigset_t mask = blocked_.previous();
  for (int signal_number : kStopSignals) sigdelset(&mask, signal_number);
  return mask;
}

int SignalGuard::wait_until(std::chrono::nanoseconds deadline, pollfd* fds, nfds_t count,
                            int seen) {
  const sigset_t wait_mask = waiting_mask();
  while (this->count() == seen) {
    timespec timeout{};
    const int ready = ::ppoll(fds, count, time_left_for_ppoll(deadline, timeout), &wait_mask);
    if (ready >= 0) return ready;
    if (errno != EINTR) throw_errno("poll");
  }
  return 0;
}

ssize_t SignalGuard::write_unless_stopped(int fd, const void* data, std::size_t size, int seen) {
  const sigset_t let_in = waiting_mask();
  sigset_t blocked;
  // Stop signals pending since `seen` are handled here, before the write can block.
  ::sigprocmask(SIG_SETMASK, &let_in, &blocked);
  ssize_t written = -1;
  errno = EINTR;
  if (count() == seen) written = ::write(fd, data, size);
  const int write_errno = errno;
  ::sigprocmask(SIG_SETMASK, &blocked, nullptr);
  errno = write_errno;
  return written;
}

std::chrono::nanoseconds SignalWaiter::now() { return monotonic_now(); }

int SignalWaiter::wait_until(std::chrono::nanoseconds deadline, std::span<pollfd> fds) {
  guard_.wait_until(deadline, fds.data(), fds.size());
  return guard_.received();
}

}  // namespace ratelimit::io
