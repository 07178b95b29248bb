#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <exception>
#include <functional>
#include <initializer_list>
#include <system_error>
#include <thread>

#include "control/control.hpp"
#include "state/key_file_names.hpp"
#include "state/state_directory.hpp"
#include "stores/bucket_store.hpp"

namespace ratelimit::control {
namespace {

// Longer than any line encode_rate() makes.
constexpr std::size_t kMaxLineBytes = 32 + stores::kMaxTimetableBytes;

// The FIFOs live in the user's private state directory, the one of the shared buckets. Without a
// safe one the pipe runs without live control.
std::optional<state::StateDirectory> control_directory(const std::string& path) {
  try {
    return state::StateDirectory::open(path);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Longer than any line encode_status() makes (a key of 80 bytes is 160 in hex, a timetable up to
// kMaxTimetableBytes).
constexpr std::size_t kMaxStatusBytes = 384 + stores::kMaxTimetableBytes;
// Longer than any line encode_call_status() makes (each key in hex and its wait).
constexpr std::size_t kMaxCallStatusBytes =
    128 + stores::kMaxKeysPerCall * (2 * state::kMaxKeyBytes + 32);
// How long past its end a call's record is still listed: its process may not have removed it yet.
constexpr std::chrono::seconds kCallRecordGrace{1};
// How often a pipe's status is published while its rate stays the same, once asked for.
constexpr std::chrono::seconds kStatusInterval{1};
// The line `status` and `set` send to ask a pipe for its status. It is no rate and not counted as
// answered, so that a `set` at the same time still waits for the answer to its own line (an older
// pipe counts it, and publishes anyway). Nobody looks at most pipes, and a status file made by
// every pipe at its start cost a slow one about a sixth of its CPU on ext4 (scripts/bench_cpu.sh
// at 1 kB/s).
constexpr std::string_view kStatusRequest = "status";
// How long `status` waits for the pipes it asked: a pipe waiting for its reader answers only once
// it can write again, and is listed without its status.
constexpr std::chrono::milliseconds kLongestStatusAnswer{500};
constexpr std::chrono::milliseconds kAnswerPoll{2};

std::string fifo_name(long pid, bool counts_bytes) {
  return "pipe-" + std::to_string(pid) + (counts_bytes ? ".bytes" : ".records");
}

std::string status_name(long pid) { return "pipe-" + std::to_string(pid) + ".status"; }

std::string call_status_name(long pid) { return "call-" + std::to_string(pid) + ".status"; }

// The process id of a pipe's or a call's file name (`prefix` "pipe-" or "call-", "PID" and one of
// `suffixes`), if it is one.
std::optional<long> pid_of_name(std::string_view name,
                                std::initializer_list<std::string_view> suffixes,
                                std::string_view prefix = "pipe-") {
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  long pid = 0;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
  const std::string_view suffix(end, static_cast<std::size_t>(name.data() + name.size() - end));
  if (error != std::errc() || pid <= 0 ||
      std::find(suffixes.begin(), suffixes.end(), suffix) == suffixes.end())
    return std::nullopt;
  return pid;
}

std::optional<long> pid_of_fifo(std::string_view name) {
  return pid_of_name(name, {".bytes", ".records"});
}

bool is_gone(long pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

void remove_files_of_gone_processes(const state::StateDirectory& directory) {
  for (const std::string& name : directory.file_names()) {
    if (const std::optional<long> pid = pid_of_fifo(name);
        pid && is_gone(*pid) && directory.is_fifo(name))
      directory.remove(name);
    if (const std::optional<long> pid = pid_of_name(name, {".status", ".status.new"});
        pid && is_gone(*pid))
      directory.remove(name);
    if (const std::optional<long> pid = pid_of_name(name, {".status", ".status.new"}, "call-");
        pid && is_gone(*pid))
      directory.remove(name);
  }
}

std::optional<PipeStatus> read_status_of(const state::StateDirectory& directory, long pid) {
  // A read that met a rewrite half done fails the record's check; a rewrite takes microseconds
  // and comes at most once per wake-up of the pipe, so the next read finds it whole.
  constexpr int kReads = 3;
  for (int read = 0; read < kReads; ++read) {
    const std::optional<std::string> record =
        directory.read_regular(status_name(pid), kMaxStatusBytes);
    if (!record) return std::nullopt;
    if (std::optional<PipeStatus> status = decode_status(*record)) return status;
  }
  return std::nullopt;
}

// A writer of the FIFO `fifo`; none when no process reads it (one killed before it could remove
// it). Non-blocking: such a FIFO is known at once.
io::FileDescriptor open_fifo_writer(const state::StateDirectory& directory,
                                    const std::string& fifo) {
  try {
    return directory.open_fifo_for_writing(fifo);
  } catch (const std::system_error&) {
    return {};
  }
}

// Shorter than PIPE_BUF, so written whole or not at all; false when not (the FIFO is full: its
// pipe has not read it for long).
bool write_line(const io::FileDescriptor& fifo, std::string_view line) {
  return io::retry_on_eintr([&] { return ::write(fifo.get(), line.data(), line.size()); }) >= 0;
}

// Asks the pipe reading `fifo` for its status; false if the request could not be written (the
// pipe is then shown without one).
bool ask_status(const io::FileDescriptor& fifo) {
  return write_line(fifo, std::string(kStatusRequest) + '\n');
}

// The status of pipe `pid` once `wanted` accepts it, read until `deadline`; nullopt if none came.
std::optional<PipeStatus> await_status(const state::StateDirectory& directory, long pid,
                                       std::chrono::steady_clock::time_point deadline,
                                       const std::function<bool(const PipeStatus&)>& wanted) {
  while (true) {
    if (std::optional<PipeStatus> status = read_status_of(directory, pid);
        status && wanted(*status))
      return status;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(kAnswerPoll);
  }
}

bool any_status(const PipeStatus&) { return true; }

}  // namespace

std::unique_ptr<ControlChannel> ControlChannel::create(const std::string& state_dir,
                                                       bool counts_bytes) {
  std::optional<state::StateDirectory> directory = control_directory(state_dir);
  if (!directory) return nullptr;
  try {
    remove_files_of_gone_processes(*directory);
    // Left by an earlier process with this id that was killed.
    directory->remove(fifo_name(::getpid(), !counts_bytes));
    directory->remove(status_name(::getpid()));
  } catch (const std::exception&) {
    // Tidying is no reason to run without control.
  }
  std::string name = fifo_name(::getpid(), counts_bytes);
  io::FileDescriptor fifo = directory->make_fifo(name);
  if (!fifo) return nullptr;
  return std::unique_ptr<ControlChannel>(
      new ControlChannel(std::move(*directory), std::move(name), std::move(fifo)));
}

ControlChannel::ControlChannel(state::StateDirectory directory, std::string name,
                               io::FileDescriptor fifo)
    : directory_(std::move(directory)),
      name_(std::move(name)),
      status_name_(status_name(::getpid())),
      fifo_(std::move(fifo)) {}

ControlChannel::~ControlChannel() {
  try {
    // The status first: a FIFO without a status is a pipe that has not yet said anything.
    directory_.remove(status_name_);
    directory_.remove(name_);
  } catch (const std::exception&) {
    // Left behind: the next pipe's create() removes it.
  }
}

std::vector<std::string> ControlChannel::take_lines() {
  std::vector<std::string> lines;
  char buffer[512];
  ssize_t got;
  while ((got = io::retry_on_eintr([&] { return ::read(fifo_.get(), buffer, sizeof buffer); })) >
         0) {
    for (const char byte : std::string_view(buffer, static_cast<std::size_t>(got))) {
      if (byte == '\n') {
        asked_ = true;
        if (!dropping_line_ && partial_line_ == kStatusRequest) {
          partial_line_.clear();
          continue;
        }
        ++lines_taken_;
        if (!dropping_line_) lines.push_back(std::move(partial_line_));
        partial_line_.clear();
        dropping_line_ = false;
      } else if (partial_line_.size() == kMaxLineBytes) {
        partial_line_.clear();
        dropping_line_ = true;
      } else if (!dropping_line_) {
        partial_line_ += byte;
      }
    }
  }
  return lines;
}

void ControlChannel::publish(PipeStatus status, std::chrono::nanoseconds now) {
  if (!asked_) return;
  status.answered = lines_taken_;
  const bool due = !published_ || published_->rate != status.rate ||
                   published_->answered != status.answered ||
                   now - published_at_ >= kStatusInterval;
  if (!due) return;
  const std::string record = encode_status(status);
  try {
    if (status_file_)
      io::rewrite_from_start(status_file_, record, status_bytes_);
    else
      status_file_ = directory_.replace_unlocked(status_name_, record);
  } catch (const std::system_error&) {
    return;  // tried again at the next call
  }
  status_bytes_ = record.size();
  published_ = status;
  published_at_ = now;
}

std::optional<PipeStatus> read_status(const RunningPipe& pipe) {
  const std::optional<long> pid = pid_of_fifo(pipe.fifo_name);
  return pid ? read_status_of(pipe.directory, *pid) : std::nullopt;
}

std::vector<ListedPipe> list_running_pipes(const std::string& path) {
  const state::StateDirectory directory = state::StateDirectory::open(path);
  std::vector<ListedPipe> pipes;
  std::vector<std::size_t> asked;
  for (const std::string& name : directory.file_names()) {
    const std::optional<long> pid = pid_of_fifo(name);
    if (!pid || !directory.is_fifo(name)) continue;
    const io::FileDescriptor fifo = open_fifo_writer(directory, name);
    if (!fifo) continue;
    ListedPipe& pipe = pipes.emplace_back(
        ListedPipe{*pid, name.ends_with(".bytes"), read_status_of(directory, *pid)});
    if (!pipe.status && ask_status(fifo)) asked.push_back(pipes.size() - 1);
  }
  // Asked all at once, then awaited together: each answers at its next wake-up.
  const auto deadline = std::chrono::steady_clock::now() + kLongestStatusAnswer;
  for (const std::size_t index : asked)
    pipes[index].status = await_status(directory, pipes[index].pid, deadline, any_status);
  std::sort(pipes.begin(), pipes.end(),
            [](const ListedPipe& a, const ListedPipe& b) { return a.pid < b.pid; });
  return pipes;
}

std::optional<RunningPipe> find_running_pipe(const std::string& state_dir, long pid) {
  std::optional<state::StateDirectory> directory = control_directory(state_dir);
  if (!directory) return std::nullopt;
  for (const bool counts_bytes : {true, false}) {
    std::string name = fifo_name(pid, counts_bytes);
    if (directory->is_fifo(name))
      return RunningPipe{std::move(*directory), std::move(name), counts_bytes};
  }
  return std::nullopt;
}

bool send_rate(const RunningPipe& pipe, const NewRate& rate) {
  const io::FileDescriptor fifo = open_fifo_writer(pipe.directory, pipe.fifo_name);
  if (!fifo) return false;
  if (!write_line(fifo, encode_rate(rate)))
    io::throw_errno(pipe.directory.path() + "/" + pipe.fifo_name);
  return true;
}

std::optional<PipeStatus> current_status(const RunningPipe& pipe,
                                         std::chrono::nanoseconds timeout) {
  if (std::optional<PipeStatus> status = read_status(pipe)) return status;
  const std::optional<long> pid = pid_of_fifo(pipe.fifo_name);
  const io::FileDescriptor fifo = open_fifo_writer(pipe.directory, pipe.fifo_name);
  if (!pid || !fifo || !ask_status(fifo)) return std::nullopt;
  return await_status(pipe.directory, *pid, std::chrono::steady_clock::now() + timeout, any_status);
}

std::optional<PipeStatus> await_answer(const RunningPipe& pipe, std::uint64_t answered,
                                       std::chrono::nanoseconds timeout) {
  const std::optional<long> pid = pid_of_fifo(pipe.fifo_name);
  if (!pid) return std::nullopt;
  return await_status(pipe.directory, *pid, std::chrono::steady_clock::now() + timeout,
                      [answered](const PipeStatus& status) { return status.answered > answered; });
}

std::unique_ptr<WaitingCallRecord> WaitingCallRecord::create(const std::string& state_dir,
                                                             const CallStatus& status) {
  std::optional<state::StateDirectory> directory = control_directory(state_dir);
  if (!directory) return nullptr;
  std::string name = call_status_name(::getpid());
  try {
    remove_files_of_gone_processes(*directory);
    directory->replace_unlocked(name, encode_call_status(status));
  } catch (const std::exception&) {
    return nullptr;
  }
  return std::unique_ptr<WaitingCallRecord>(
      new WaitingCallRecord(std::move(*directory), std::move(name)));
}

WaitingCallRecord::WaitingCallRecord(state::StateDirectory directory, std::string name)
    : directory_(std::move(directory)), name_(std::move(name)) {}

WaitingCallRecord::~WaitingCallRecord() {
  try {
    directory_.remove(name_);
  } catch (const std::exception&) {
    // Left behind: not listed once this process is gone, and removed by the next call or pipe.
  }
}

std::vector<ListedCall> list_waiting_calls(const std::string& path) {
  const state::StateDirectory directory = state::StateDirectory::open(path);
  const std::chrono::nanoseconds now = io::monotonic_now();
  std::vector<ListedCall> calls;
  for (const std::string& name : directory.file_names()) {
    const std::optional<long> pid = pid_of_name(name, {".status"}, "call-");
    if (!pid || is_gone(*pid)) continue;
    const std::optional<std::string> record = directory.read_regular(name, kMaxCallStatusBytes);
    if (!record) continue;
    std::optional<CallStatus> status = decode_call_status(*record);
    if (status && status->until > now - kCallRecordGrace)
      calls.push_back({*pid, std::move(*status)});
  }
  std::sort(calls.begin(), calls.end(),
            [](const ListedCall& a, const ListedCall& b) { return a.pid < b.pid; });
  return calls;
}

}  // namespace ratelimit::control
