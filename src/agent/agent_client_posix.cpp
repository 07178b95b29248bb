#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <sstream>

#include "agent/agent.hpp"
#include "agent/agent_protocol.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::agent {
namespace {

using std::chrono::nanoseconds;
using stores::AgentAnswer;

// How long a process waits for the agent it started before it goes direct (and the next process
// finds the agent up). Starting one takes a few milliseconds.
constexpr std::chrono::milliseconds kStartWait{300};

enum class Reached { connected, absent, refused };

// Connects to the agent at `path`: absent if nobody listens there, refused if the socket or the
// process listening is not this user's.
Reached connect_to(const std::string& path, io::FileDescriptor& socket) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) return Reached::absent;
  if (!S_ISSOCK(status.st_mode) || status.st_uid != ::geteuid()) return Reached::refused;
  io::FileDescriptor fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Reached::absent;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  if (io::retry_on_eintr([&] {
        return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
      }) != 0)
    return Reached::absent;
  ucred peer{};
  socklen_t size = sizeof peer;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.uid != ::geteuid())
    return Reached::refused;
  socket = std::move(fd);
  return Reached::connected;
}

// Starts `ratelimit agent` for `state_dir` as a daemon: in a session of its own, its standard
// streams /dev/null, no descriptor of this process inherited (an --max-inflight slot's lock must
// not outlive the command), no signal blocked; a grandchild, so that nobody has to reap it.
void start_agent(const std::string& state_dir) {
  // Made before fork: the child calls only async-signal-safe functions (this process may have a
  // thread).
  std::array<const char*, 5> argv{"ratelimit", "agent", "--state-dir", state_dir.c_str(), nullptr};
  sigset_t no_signals;
  sigemptyset(&no_signals);
  const pid_t child = ::fork();
  if (child < 0) return;
  if (child == 0) {
    if (::setsid() < 0) ::_exit(1);
    const pid_t agent = ::fork();
    if (agent != 0) ::_exit(agent < 0 ? 1 : 0);
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
      for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    }
    ::execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  io::retry_on_eintr([&] { return ::waitpid(child, nullptr, 0); });
}

// unread: the agent closed the connection with bytes of ours unread (the kernel says so with
// ECONNRESET; a close after reading them all is an end of file), so the request was not acted on:
// it ended when idle as the request came, or was killed before it read it.
// not_answering: no sign of life within the liveness bound.
enum class Moved { done, closed, unread, stopped, too_late, not_answering };

// Writes all of `bytes`, waiting through `waiter` while the socket is full.
Moved send_all(int fd, std::string_view bytes, nanoseconds deadline, io::Waiter& waiter) {
  while (!bytes.empty()) {
    const ssize_t sent = io::retry_on_eintr(
        [&] { return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT); });
    if (sent > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(sent));
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Moved::closed;
    pollfd ready{.fd = fd, .events = POLLOUT, .revents = 0};
    if (const int signal = waiter.wait_until(deadline, {&ready, 1}); signal != 0)
      return Moved::stopped;
    if (ready.revents == 0 && waiter.now() >= deadline) return Moved::too_late;
  }
  return Moved::done;
}

// Reads until `buffer` holds a whole frame, waiting through `waiter`.
Moved receive_frame(int fd, std::string& buffer, std::string& payload, nanoseconds deadline,
                    io::Waiter& waiter) {
  std::array<char, 4096> chunk;
  while (true) {
    try {
      if (auto frame = take_frame(buffer)) {
        payload = std::move(*frame);
        return Moved::done;
      }
    } catch (const std::length_error&) {
      return Moved::closed;
    }
    const ssize_t received =
        io::retry_on_eintr([&] { return ::recv(fd, chunk.data(), chunk.size(), MSG_DONTWAIT); });
    if (received > 0) {
      buffer.append(chunk.data(), static_cast<std::size_t>(received));
      continue;
    }
    if (received < 0 && errno == ECONNRESET && buffer.empty()) return Moved::unread;
    if (received == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return Moved::closed;
    pollfd ready{.fd = fd, .events = POLLIN, .revents = 0};
    if (const int signal = waiter.wait_until(deadline, {&ready, 1}); signal != 0)
      return Moved::stopped;
    if (ready.revents == 0 && waiter.now() >= deadline) return Moved::too_late;
  }
}

// `from` + `duration`, nanoseconds::max() if that is beyond it.
nanoseconds after(nanoseconds from, nanoseconds duration) {
  return duration >= nanoseconds::max() - from ? nanoseconds::max() : from + duration;
}

// Waits for the answer to the request sent on `fd`, until `deadline`; whenever `liveness` passes
// without it, asks `runs` whether the agent runs (until `liveness` from then), and stops waiting
// if it does not. A deadline that comes before the agent was asked is one more reason to ask: the
// caller goes direct (not too late) when the agent is not there to answer.
template <typename Runs>
Moved await_answer(int fd, std::string& payload, nanoseconds deadline, nanoseconds liveness,
                   io::Waiter& waiter, Runs runs) {
  std::string buffer;
  bool seen_running = false;
  nanoseconds ask_at = after(waiter.now(), liveness);
  while (true) {
    const Moved received = receive_frame(fd, buffer, payload, std::min(deadline, ask_at), waiter);
    if (received != Moved::too_late || liveness == nanoseconds::max()) return received;
    if (waiter.now() >= deadline && seen_running) return Moved::too_late;
    if (!runs(after(waiter.now(), liveness))) return Moved::not_answering;
    seen_running = true;
    if (waiter.now() >= deadline) return Moved::too_late;
    ask_at = after(waiter.now(), liveness);
  }
}

// Whether the agent closed a connection kept since the last exchange (it ended when idle).
bool closed_by_agent(int fd) {
  pollfd ready{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&ready, 1, 0) != 0;
}

}  // namespace

bool AgentClient::connect(nanoseconds deadline, io::Waiter& waiter) {
  if (given_up_) return false;
  const std::string path = state_dir_ + "/" + std::string(kSocketName);
  given_up_ = true;
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return false;
  try {
    state::StateDirectory::open(state_dir_);
  } catch (const std::exception&) {
    // The direct path says what is wrong with the directory, if it needs it.
    return false;
  }
  const nanoseconds start_by = std::min(deadline, waiter.now() + nanoseconds(kStartWait));
  nanoseconds pause = std::chrono::microseconds(100);
  while (true) {
    switch (connect_to(path, socket_)) {
      case Reached::connected:
        given_up_ = false;
        return true;
      case Reached::refused:
        return false;
      case Reached::absent:
        break;
    }
    if (!start_) return false;
    if (!started_) {
      start_agent(state_dir_);
      started_ = true;
    }
    if (waiter.now() + pause > start_by) return false;
    if (waiter.wait_until(waiter.now() + pause) != 0) return false;
    pause = std::min(pause * 2, nanoseconds(std::chrono::milliseconds(5)));
  }
}

bool AgentClient::runs(nanoseconds deadline, io::Waiter& waiter) const {
  io::FileDescriptor socket;
  if (connect_to(state_dir_ + "/" + std::string(kSocketName), socket) != Reached::connected)
    return false;
  std::string buffer;
  std::string answer;
  return send_all(socket.get(), framed(kStatusRequest), deadline, waiter) == Moved::done &&
         receive_frame(socket.get(), buffer, answer, deadline, waiter) == Moved::done;
}

AgentAnswer AgentClient::exchange(std::string_view request, nanoseconds deadline,
                                  nanoseconds liveness, io::Waiter& waiter) {
  const std::string frame = framed(request);
  // A second attempt only when the first was not acted on: the request did not get out, or the
  // agent ended without reading it (between two requests of a long-lived process, or as it came).
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (socket_ && closed_by_agent(socket_.get())) socket_.reset();
    if (!socket_) {
      started_ = false;
      if (!connect(deadline, waiter)) return {.outcome = AgentAnswer::Outcome::no_agent};
    }
    const Moved sent = send_all(socket_.get(), frame, deadline, waiter);
    AgentAnswer answer;
    Moved received = sent;
    if (sent == Moved::closed) {
      socket_.reset();
      continue;
    }
    if (sent == Moved::done)
      received = await_answer(socket_.get(), answer.answer, deadline, liveness, waiter,
                              [&](nanoseconds by) { return runs(by, waiter); });
    switch (received) {
      case Moved::done:
        answer.outcome = AgentAnswer::Outcome::answered;
        return answer;
      case Moved::unread:
        socket_.reset();
        continue;
      case Moved::closed:
        answer.outcome = AgentAnswer::Outcome::lost;
        break;
      case Moved::not_answering:
        answer.outcome = AgentAnswer::Outcome::not_answering;
        break;
      case Moved::stopped:
        answer.outcome = AgentAnswer::Outcome::stopped;
        answer.signal = waiter.wait_until(waiter.now());
        break;
      case Moved::too_late:
        answer.outcome = AgentAnswer::Outcome::too_late;
        break;
    }
    // An answer may still come on it: the next exchange starts on a new connection.
    socket_.reset();
    return answer;
  }
  return {.outcome = AgentAnswer::Outcome::no_agent};
}

std::optional<AgentReport> ask_agent(const std::string& state_dir) {
  // status runs with the stop signals' default action: a plain clock and poll do.
  struct PlainWaiter final : io::Waiter {
    nanoseconds now() override { return io::monotonic_now(); }
    int wait_until(nanoseconds deadline, std::span<pollfd> fds) override {
      timespec storage{};
      ::ppoll(fds.data(), fds.size(), io::time_left_for_ppoll(deadline, storage), nullptr);
      return 0;
    }
  } waiter;
  AgentClient client(state_dir, false);
  const AgentAnswer answer = client.exchange(kStatusRequest, waiter.now() + std::chrono::seconds(1),
                                             nanoseconds::max(), waiter);
  if (answer.outcome != AgentAnswer::Outcome::answered) return std::nullopt;
  AgentReport report;
  std::istringstream fields(answer.answer);
  if (!(fields >> report.pid >> report.connections >> report.decisions)) return std::nullopt;
  return report;
}

}  // namespace ratelimit::agent
