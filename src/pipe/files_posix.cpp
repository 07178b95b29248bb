#include <fcntl.h>
#include <fmt/core.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "pipe/files.hpp"

namespace ratelimit::pipe {
namespace {

constexpr std::size_t kDefaultPipeCapacity = std::size_t{64} * 1024;
// A pipe's bytes left once its writers are gone, when it does not say how many: as many as never
// run out, so that its end is found by reading it.
constexpr std::size_t kLeftUntilRead = std::numeric_limits<std::size_t>::max();

bool is_standard_stream(const std::string& name) { return name.empty() || name == "-"; }

// A copy of standard input or output for the engine; -1 with EBADF when it was closed.
int duplicate_standard_stream(int fd) {
  if (io::standard_stream_was_closed(fd)) {
    errno = EBADF;
    return -1;
  }
  return ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

[[noreturn]] void throw_input_error(const std::string& name) { throw InputError(errno, name); }

// A descriptor someone else made non-blocking (they are shared with the parent) reports EAGAIN.
bool would_block() { return errno == EAGAIN || errno == EWOULDBLOCK; }

struct stat status_of(int fd, const std::string& name) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw_input_error(name);
  return status;
}

// SIGPIPE ignored, so that a closed downstream is seen as EPIPE; returns the disposition it had.
struct sigaction ignore_sigpipe() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction previous {};
  ::sigaction(SIGPIPE, &ignore, &previous);
  return previous;
}

}  // namespace

std::optional<std::uint64_t> FileIo::count_records(char delimiter, std::uint64_t most_bytes) const {
  if (!total_bytes_ || *total_bytes_ > most_bytes) return std::nullopt;
  std::vector<char> buffer(std::size_t{1} << 16);
  std::uint64_t records = 0;
  char last = delimiter;
  for (const Input& input : inputs_) {
    off_t offset = ::lseek(input.fd.get(), 0, SEEK_CUR);
    std::size_t left = input.bytes_left.value_or(0);
    if (offset < 0) return std::nullopt;
    while (left > 0) {
      const ssize_t got = io::retry_on_eintr([&] {
        return ::pread(input.fd.get(), buffer.data(), std::min(buffer.size(), left), offset);
      });
      if (got <= 0) return std::nullopt;
      const auto bytes = static_cast<std::size_t>(got);
      records +=
          static_cast<std::uint64_t>(std::count(buffer.data(), buffer.data() + bytes, delimiter));
      last = buffer[bytes - 1];
      offset += got;
      left -= bytes;
    }
  }
  return last == delimiter ? records : records + 1;
}

FileIo::FileIo(const std::vector<std::string>& inputs, const std::string& output,
               control::ControlChannel* control)
    : control_(control) {
  const std::vector<FileIdentity> regular_inputs = open_inputs(inputs);
  const struct stat output_status = open_output(output);
  choose_output_write(output_status);
  if (S_ISREG(output_status.st_mode))
    empty_regular_output(output_status, regular_inputs, is_standard_stream(output));
  previous_sigpipe_ = ignore_sigpipe();
  signals_.emplace();
  waiter_.emplace(*signals_);
}

std::vector<FileIo::FileIdentity> FileIo::open_inputs(const std::vector<std::string>& names) {
  std::vector<FileIdentity> regular_inputs;
  std::uint64_t regular_bytes = 0;
  for (const std::string& name : names.empty() ? std::vector<std::string>{"-"} : names) {
    const struct stat status = open_input(name);
    if (!S_ISREG(status.st_mode)) continue;
    regular_inputs.emplace_back(status.st_dev, status.st_ino);
    regular_bytes += *inputs_.back().bytes_left;
  }
  if (regular_inputs.size() == inputs_.size()) total_bytes_ = regular_bytes;
  return regular_inputs;
}

struct stat FileIo::open_input(const std::string& name) {
  const bool standard = is_standard_stream(name);
  const std::string shown = standard ? "standard input" : name;
  io::FileDescriptor fd(
      standard ? duplicate_standard_stream(STDIN_FILENO)
               : io::retry_on_eintr([&] { return ::open(name.c_str(), O_RDONLY | O_CLOEXEC); }));
  if (!fd) throw_input_error(shown);
  const struct stat status = status_of(fd.get(), shown);
  if (S_ISDIR(status.st_mode)) {
    errno = EISDIR;
    throw_input_error(shown);
  }
  std::optional<std::size_t> bytes_left;
  const bool takes_back = S_ISREG(status.st_mode) || S_ISBLK(status.st_mode);
  const off_t position = takes_back ? std::max<off_t>(::lseek(fd.get(), 0, SEEK_CUR), 0) : 0;
  if (S_ISREG(status.st_mode))
    bytes_left = static_cast<std::size_t>(std::max<off_t>(status.st_size - position, 0));
  const bool says_held =
      S_ISFIFO(status.st_mode) || S_ISSOCK(status.st_mode) || ::isatty(fd.get()) == 1;
  inputs_.push_back(Input{.name = shown,
                          .fd = std::move(fd),
                          .is_pipe = S_ISFIFO(status.st_mode),
                          .says_held = says_held,
                          .bytes_left = bytes_left,
                          .takes_back = takes_back,
                          .shares_offset = takes_back && standard,
                          .read_offset = position});
  return status;
}

struct stat FileIo::open_output(const std::string& name) {
  const bool standard = is_standard_stream(name);
  output_name_ = standard ? "standard output" : name;
  output_ = io::FileDescriptor(
      standard ? duplicate_standard_stream(STDOUT_FILENO) : io::retry_on_eintr([&] {
        return ::open(name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
      }));
  if (!output_) io::throw_errno(output_name_);
  struct stat status {};
  if (::fstat(output_.get(), &status) != 0) io::throw_errno(output_name_);
  output_is_pipe_ = S_ISFIFO(status.st_mode);
  return status;
}

void FileIo::choose_output_write(const struct stat& status) {
  if (output_is_pipe_ || ::isatty(output_.get())) {
    if (reopen_output_non_blocking(status)) output_write_ = OutputWrite::at_once;
  } else if (S_ISREG(status.st_mode) || S_ISBLK(status.st_mode) ||
             (S_ISCHR(status.st_mode) && status.st_rdev == makedev(1, 3))) {
    output_write_ = OutputWrite::at_once;  // no reader holds these up; 1, 3 is /dev/null
  } else if (S_ISSOCK(status.st_mode)) {
    output_write_ = OutputWrite::socket;
  }
}

bool FileIo::reopen_output_non_blocking(const struct stat& status) {
  io::FileDescriptor own(::open(fmt::format("/proc/self/fd/{}", output_.get()).c_str(),
                                O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat own_status {};
  if (!own || ::fstat(own.get(), &own_status) != 0 || own_status.st_dev != status.st_dev ||
      own_status.st_ino != status.st_ino || own_status.st_rdev != status.st_rdev)
    return false;
  output_ = std::move(own);
  return true;
}

void FileIo::empty_regular_output(const struct stat& status,
                                  const std::vector<FileIdentity>& regular_inputs, bool standard) {
  if (std::find(regular_inputs.begin(), regular_inputs.end(),
                FileIdentity(status.st_dev, status.st_ino)) != regular_inputs.end())
    throw InputError(output_name_ + ": input file is output file");
  if (!standard && ::ftruncate(output_.get(), 0) != 0) io::throw_errno(output_name_);
}

FileIo::~FileIo() {
  sync_offsets();
  ::sigaction(SIGPIPE, &previous_sigpipe_, nullptr);
}

std::size_t FileIo::fit_pipes_to(std::size_t wanted_bytes) {
  const auto grow = [wanted_bytes](int fd) {
    const int capacity = ::fcntl(fd, F_GETPIPE_SZ);
    if (capacity > 0 && static_cast<std::size_t>(capacity) < wanted_bytes)
      ::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(std::min<std::size_t>(wanted_bytes, 1 << 30)));
  };
  for (const Input& input : inputs_) {
    if (input.is_pipe) grow(input.fd.get());
  }
  if (!output_is_pipe_) return kDefaultPipeCapacity;
  grow(output_.get());
  const int capacity = ::fcntl(output_.get(), F_GETPIPE_SZ);
  return capacity > 0 ? static_cast<std::size_t>(capacity) : kDefaultPipeCapacity;
}

std::chrono::nanoseconds FileIo::now() { return io::monotonic_now(); }

Wake FileIo::wait(std::chrono::nanoseconds deadline, WaitFor what) {
  sync_offsets();
  pollfd fds[2];
  nfds_t count = 0;
  const bool for_input = what == WaitFor::input;
  const bool watch_input = for_input && !at_end();
  // Asking for no events still reports POLLHUP: the pipe's last writer has closed.
  const bool watch_writers = what == WaitFor::input_end && !at_end() && inputs_[current_].is_pipe &&
                             !inputs_[current_].bytes_left;
  if (watch_input || watch_writers)
    fds[count++] = pollfd{inputs_[current_].fd.get(), watch_input ? short{POLLIN} : short{0}, 0};
  const nfds_t control_index = count;
  if (control_) fds[count++] = pollfd{control_->fd(), POLLIN, 0};
  if (for_input && !watch_input) deadline = now();  // the end of input is always ready
  const int ready = signals_->wait_until(deadline, fds, count);
  if (signals_->received() != 0) return Wake::stop;
  if (ready > 0 && control_ && fds[control_index].revents != 0) return Wake::control;
  if (for_input && (!watch_input || fds[0].revents != 0)) return Wake::ready;
  if (watch_writers && fds[0].revents != 0) {
    note_writers_gone(inputs_[current_]);
    return Wake::ready;
  }
  return Wake::timeout;
}

void FileIo::note_writers_gone(Input& input) {
  int bytes = 0;
  input.bytes_left = ::ioctl(input.fd.get(), FIONREAD, &bytes) == 0
                         ? static_cast<std::size_t>(bytes)
                         : kLeftUntilRead;
}

void FileIo::note_moved(Input& input, std::size_t bytes) {
  if (!input.bytes_left) return;
  // More than was known: the file grew, or a new writer opened the FIFO. Unknown again.
  if (bytes > *input.bytes_left) {
    input.bytes_left.reset();
    return;
  }
  *input.bytes_left -= bytes;
}

bool FileIo::input_exhausted() const { return at_end() || inputs_[current_].bytes_left == 0; }

std::optional<std::size_t> FileIo::bytes_ready() {
  if (at_end()) return 0;
  Input& input = inputs_[current_];
  if (input.is_pipe && !input.bytes_left) {
    // Asking for no events still reports POLLHUP.
    pollfd writers{input.fd.get(), 0, 0};
    if (io::retry_on_eintr([&] { return ::poll(&writers, 1, 0); }) > 0 &&
        (writers.revents & POLLHUP))
      note_writers_gone(input);
  }
  if (input.bytes_left)
    return *input.bytes_left == kLeftUntilRead ? std::nullopt : input.bytes_left;
  int bytes = 0;
  if (!input.says_held || ::ioctl(input.fd.get(), FIONREAD, &bytes) != 0) return std::nullopt;
  return static_cast<std::size_t>(bytes);
}

bool FileIo::input_end_known() const {
  const std::optional<std::size_t>& left = inputs_[current_].bytes_left;
  return at_end() || (left && *left != kLeftUntilRead);
}

bool FileIo::next_input() {
  // Its offset still has to follow the bytes of it that are yet to go out.
  Input& input = inputs_[current_];
  if (input.unwritten == 0 && input.unsynced == 0) input.fd.reset();
  ++current_;
  return at_end();
}

void FileIo::note_written(std::size_t bytes) {
  for (std::size_t i = first_pending_; bytes > 0 && i <= current_ && i < inputs_.size(); ++i) {
    Input& input = inputs_[i];
    const std::size_t taken = std::min(bytes, input.unwritten);
    input.unwritten -= taken;
    input.unsynced += taken;
    bytes -= taken;
  }
}

void FileIo::sync_offsets() {
  for (; first_pending_ <= current_ && first_pending_ < inputs_.size(); ++first_pending_) {
    Input& input = inputs_[first_pending_];
    // Relative: the offset is where the last move left it.
    if (input.unsynced > 0 && input.shares_offset)
      ::lseek(input.fd.get(), static_cast<off_t>(input.unsynced), SEEK_CUR);
    input.unsynced = 0;
    if (first_pending_ == current_ || input.unwritten > 0) break;
    input.fd.reset();
  }
}

bool FileIo::input_ready_now() {
  if (at_end()) return true;
  pollfd input{inputs_[current_].fd.get(), POLLIN, 0};
  return io::retry_on_eintr([&] { return ::poll(&input, 1, 0); }) > 0;
}

Moved FileIo::read(std::span<char> buffer) {
  if (at_end()) return Moved{0, true, false};
  Input& input = inputs_[current_];
  const ssize_t got = io::retry_on_eintr([&] {
    return input.takes_back
               ? ::pread(input.fd.get(), buffer.data(), buffer.size(), input.read_offset)
               : ::read(input.fd.get(), buffer.data(), buffer.size());
  });
  if (got < 0 && would_block()) return Moved{0, false, false};
  if (got < 0) io::throw_errno("read " + input.name);
  if (got == 0) return Moved{0, next_input(), false};
  note_moved(input, static_cast<std::size_t>(got));
  input.read_offset += got;
  input.unwritten += static_cast<std::size_t>(got);
  return Moved{static_cast<std::size_t>(got), false, false};
}

bool FileIo::input_takes_back() const { return !at_end() && inputs_[current_].takes_back; }

bool FileIo::unread(std::size_t bytes) {
  // Only a file's offset can move back; the descriptor of standard input is the caller's too, so
  // the next command reading it starts there.
  if (!input_takes_back()) return false;
  Input& input = inputs_[current_];
  // Bytes of an earlier input as well: those can only go out.
  if (bytes > input.unwritten) return false;
  input.read_offset -= static_cast<off_t>(bytes);
  input.unwritten -= bytes;
  if (input.bytes_left) *input.bytes_left += bytes;
  return true;
}

std::optional<std::size_t> FileIo::write(std::span<const char> data) {
  // The first stop signal cuts a blocked write short. After it the engine writes what it has read,
  // and only a further signal ends that.
  const int seen = std::min(signals_->count(), 1);
  while (true) {
    if (signals_->count() != seen) return 0;
    const ssize_t written = write_once(data, seen);
    if (written >= 0) {
      note_written(static_cast<std::size_t>(written));
      return static_cast<std::size_t>(written);
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE) return std::nullopt;
    if (!would_block()) io::throw_errno("write " + output_name_);
    if (!wait_for_output(seen)) return 0;
  }
}

ssize_t FileIo::write_once(std::span<const char> data, int seen) {
  switch (output_write_) {
    case OutputWrite::at_once:
      return ::write(output_.get(), data.data(), data.size());
    case OutputWrite::socket:
      return ::send(output_.get(), data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    case OutputWrite::signals_let_in:
      break;
  }
  // Terminals that cannot be reopened and other character devices.
  return signals_->write_unless_stopped(output_.get(), data.data(), data.size(), seen);
}

std::optional<Moved> FileIo::splice(std::size_t max_bytes) {
  if (at_end()) return Moved{0, true, false};
  Input& input = inputs_[current_];
  if (!input.is_pipe && !output_is_pipe_) return std::nullopt;
  const ssize_t moved = io::retry_on_eintr([&] {
    return ::splice(input.fd.get(), nullptr, output_.get(), nullptr, max_bytes,
                    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  });
  if (moved < 0) {
    if (errno == EPIPE) return Moved{0, false, true};
    if (would_block()) {
      // The input is empty or the output full: after waiting for the output, the engine waits
      // for input again. A stop signal ends this wait too: nothing has been read that could be
      // lost, so a stuck consumer cannot hold ratelimit.
      wait_for_output(0);
      return Moved{0, false, false};
    }
    // Descriptors splice cannot join (a terminal, an O_APPEND file): read and write instead.
    if (errno == EINVAL || errno == ENOSYS) return std::nullopt;
    io::throw_errno("splice " + input.name + " to " + output_name_);
  }
  if (moved == 0) return Moved{0, next_input(), false};
  note_moved(input, static_cast<std::size_t>(moved));
  return Moved{static_cast<std::size_t>(moved), false, false};
}

std::optional<control::NewRate> FileIo::take_new_rate() {
  std::optional<control::NewRate> rate;
  if (!control_) return rate;
  for (const std::string& line : control_->take_lines()) {
    if (std::optional<control::NewRate> sent = control::decode_rate(line)) rate = std::move(sent);
  }
  return rate;
}

int FileIo::stop_signal() const { return signals_->received(); }

bool FileIo::wait_for_output(int seen) {
  sync_offsets();
  pollfd output{output_.get(), POLLOUT, 0};
  return signals_->wait_until(std::chrono::nanoseconds::max(), &output, 1, seen) > 0;
}

}  // namespace ratelimit::pipe
