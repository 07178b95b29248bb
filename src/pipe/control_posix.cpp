#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <exception>

#include "pipe/control.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::pipe {
namespace {

// The FIFOs live in the user's private state directory, the one of the shared buckets. Without a
// safe one the pipe runs without live control.
std::optional<std::string> control_directory() {
  try {
    return backends::StateDirectory::open(backends::state_dir_from_environment("")).path();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string fifo_path(const std::string& directory, long pid, bool counts_bytes) {
  return directory + "/pipe-" + std::to_string(pid) + (counts_bytes ? ".bytes" : ".records");
}

}  // namespace

std::unique_ptr<ControlChannel> ControlChannel::create(bool counts_bytes) {
  const std::optional<std::string> directory = control_directory();
  if (!directory) return nullptr;
  const std::string path = fifo_path(*directory, ::getpid(), counts_bytes);
  // Left by earlier processes with this id that were killed.
  ::unlink(fifo_path(*directory, ::getpid(), !counts_bytes).c_str());
  ::unlink(path.c_str());
  if (::mkfifo(path.c_str(), 0600) != 0) return nullptr;
  // Opened for reading and writing so that it never reports end-of-file between senders.
  io::FileDescriptor fifo(::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fifo) {
    ::unlink(path.c_str());
    return nullptr;
  }
  return std::unique_ptr<ControlChannel>(new ControlChannel(path, std::move(fifo)));
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

std::optional<RunningPipe> find_running_pipe(long pid) {
  const std::optional<std::string> directory = control_directory();
  if (!directory) return std::nullopt;
  for (const bool counts_bytes : {true, false}) {
    std::string path = fifo_path(*directory, pid, counts_bytes);
    struct stat status {};
    if (::lstat(path.c_str(), &status) == 0 && S_ISFIFO(status.st_mode))
      return RunningPipe{std::move(path), counts_bytes};
  }
  return std::nullopt;
}

void send_rate(const RunningPipe& pipe, double units_per_second) {
  // Non-blocking: a FIFO nobody reads (a process that was killed) fails with ENXIO at once.
  io::FileDescriptor fifo(io::retry_on_eintr(
      [&] { return ::open(pipe.fifo_path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC); }));
  if (!fifo) io::throw_errno(pipe.fifo_path);
  const std::string line = encode_rate(units_per_second);
  // Shorter than PIPE_BUF, so written whole or not at all.
  if (io::retry_on_eintr([&] { return ::write(fifo.get(), line.data(), line.size()); }) < 0)
    io::throw_errno(pipe.fifo_path);
}

}  // namespace ratelimit::pipe
