#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "pipe/control.hpp"

namespace ratelimit::pipe {
namespace {

// Private to the user: made 0700 if missing; refused when owned by someone else or open to others.
std::optional<std::string> control_directory() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::string directory = runtime && *runtime
                                    ? std::string(runtime) + "/ratelimit"
                                    : "/tmp/ratelimit-" + std::to_string(::getuid());
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) return std::nullopt;
  struct stat status {};
  if (::lstat(directory.c_str(), &status) != 0 || !S_ISDIR(status.st_mode) ||
      status.st_uid != ::getuid() || (status.st_mode & 077) != 0)
    return std::nullopt;
  return directory;
}

std::optional<std::string> fifo_path(long pid) {
  const std::optional<std::string> directory = control_directory();
  if (!directory) return std::nullopt;
  return *directory + "/pipe-" + std::to_string(pid);
}

}  // namespace

std::unique_ptr<ControlChannel> ControlChannel::create() {
  const std::optional<std::string> path = fifo_path(::getpid());
  if (!path) return nullptr;
  ::unlink(path->c_str());  // left by an earlier process with this id that was killed
  if (::mkfifo(path->c_str(), 0600) != 0) return nullptr;
  // Opened for reading and writing so that it never reports end-of-file between senders.
  io::FileDescriptor fifo(::open(path->c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fifo) {
    ::unlink(path->c_str());
    return nullptr;
  }
  return std::unique_ptr<ControlChannel>(new ControlChannel(*path, std::move(fifo)));
}

ControlChannel::ControlChannel(std::string path, io::FileDescriptor fifo)
    : path_(std::move(path)), fifo_(std::move(fifo)) {}

ControlChannel::~ControlChannel() { ::unlink(path_.c_str()); }

std::vector<std::string> ControlChannel::take_lines() {
  char buffer[512];
  ssize_t got;
  while ((got = io::retry_on_eintr([&] { return ::read(fifo_.get(), buffer, sizeof buffer); })) > 0)
    partial_line_.append(buffer, static_cast<std::size_t>(got));
  std::vector<std::string> lines;
  std::size_t line_end;
  while ((line_end = partial_line_.find('\n')) != std::string::npos) {
    lines.push_back(partial_line_.substr(0, line_end));
    partial_line_.erase(0, line_end + 1);
  }
  return lines;
}

void send_rate_message(long pid, const RateMessage& message) {
  const std::optional<std::string> path = fifo_path(pid);
  if (!path) {
    errno = EACCES;
    io::throw_errno("control directory");
  }
  // Non-blocking: a FIFO nobody reads (a process that was killed) fails with ENXIO at once.
  io::FileDescriptor fifo(
      io::retry_on_eintr([&] { return ::open(path->c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC); }));
  if (!fifo) io::throw_errno("no ratelimit pipe runs as process " + std::to_string(pid));
  const std::string line = encode(message);
  // Shorter than PIPE_BUF, so written whole or not at all.
  if (io::retry_on_eintr([&] { return ::write(fifo.get(), line.data(), line.size()); }) < 0)
    io::throw_errno("send to process " + std::to_string(pid));
}

}  // namespace ratelimit::pipe
