#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <ctime>
#include <optional>

#include "errors.hpp"
#include "io/posix.hpp"
#include "stores/redis/redis_connection.hpp"
#include "stores/redis/redis_connection_transport.hpp"
#include "stores/redis/redis_resp.hpp"

namespace ratelimit::stores::redis {
namespace {

// While alive, SIGPIPE is blocked in this thread, and one raised by OpenSSL's write to a
// connection the server closed is taken back before the mask is restored: a dropped connection
// is an error return (EPIPE), never the death of the process, and the disposition is left as it
// was (a command that `exec` runs inherits it). A plain socket needs none of it: it sends with
// MSG_NOSIGNAL.
class SigpipeBlocked {
 public:
  SigpipeBlocked() { was_pending_ = pending(); }
  ~SigpipeBlocked() {
    if (!was_pending_ && pending()) {
      const timespec no_wait{};
      io::retry_on_eintr([&] { return ::sigtimedwait(&sigpipe_, nullptr, &no_wait); });
    }
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  static bool pending() {
    sigset_t set;
    ::sigpending(&set);
    return sigismember(&set, SIGPIPE) == 1;
  }
  static sigset_t only_sigpipe() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    return set;
  }
  const sigset_t sigpipe_ = only_sigpipe();
  // Declared after sigpipe_, which it blocks; restores the mask after the destructor's body.
  const io::BlockedSignals blocked_{sigpipe_};
  bool was_pending_ = false;
};

// A transport that failed under a command: the server or the network ended the connection.
class TransportLost : public Failure {
 public:
  TransportLost(const Failure& cause, bool sent) : Failure(cause), sent(sent) {}
  bool sent;
};

// What `transport` holds now, fed to `reader`: how many bytes (none: `wanted` says what to wait
// for). A transport that fails is lost, with the command sent whole (`sent`: it may have run) or
// not.
std::size_t receive_into(Transport& transport, redisReader& reader, std::span<char> buffer,
                         short& wanted, bool sent) {
  std::size_t received = 0;
  try {
    received = transport.receive(buffer, wanted);
  } catch (const Failure& failure) {
    throw TransportLost(failure, sent);
  }
  if (received > 0 && ::redisReaderFeed(&reader, buffer.data(), received) != REDIS_OK)
    throw std::bad_alloc();
  return received;
}

// The monotonic clock and a poll that no signal cuts short, for operations run without a stop
// waiter: status, reset and set run with the stop signals' default action, which ends the process
// at once anyway.
class UninterruptedWaiter final : public io::Waiter {
 public:
  std::chrono::nanoseconds now() override { return io::monotonic_now(); }
  int wait_until(std::chrono::nanoseconds deadline, std::span<pollfd> fds) override {
    const auto remaining = std::max(deadline - now(), std::chrono::nanoseconds::zero());
    const timespec timeout{.tv_sec = static_cast<time_t>(remaining.count() / 1'000'000'000),
                           .tv_nsec = static_cast<long>(remaining.count() % 1'000'000'000)};
    // EINTR returns early, as a wait that ended with nothing ready: the caller waits again.
    if (::ppoll(fds.data(), fds.size(), &timeout, nullptr) < 0 && errno != EINTR)
      io::throw_errno("poll");
    return 0;
  }
};

// `timeout` from `now` on, saturated.
std::chrono::nanoseconds deadline_after(std::chrono::nanoseconds now,
                                        std::chrono::milliseconds timeout) {
  return timeout > std::chrono::nanoseconds::max() - now ? std::chrono::nanoseconds::max()
                                                         : now + timeout;
}

std::string describe(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0) return std::to_string(duration.count() / 1000) + "s";
  return std::to_string(duration.count()) + "ms";
}

}  // namespace

Deadline::Deadline(std::chrono::milliseconds timeout, io::Waiter* waiter)
    : waiter_(waiter), timeout_(timeout) {
  static UninterruptedWaiter uninterrupted;
  if (waiter_ == nullptr) waiter_ = &uninterrupted;
  unavailable_at_ = deadline_after(waiter_->now(), timeout);
}

Deadline Deadline::renewed(std::chrono::milliseconds timeout) const {
  Deadline next(timeout, waiter_);
  next.refused_at_ = refused_at_;
  next.failover_ends_ = failover_ends_;
  return next;
}

Deadline Deadline::failover_budget(std::chrono::milliseconds failover_timeout) const {
  if (!*failover_ends_) *failover_ends_ = deadline_after(waiter_->now(), failover_timeout);
  Deadline budget = *this;
  budget.timeout_ = failover_timeout;
  budget.unavailable_at_ = **failover_ends_;
  return budget;
}

Deadline Deadline::share(std::chrono::milliseconds timeout) const {
  Deadline part = renewed(timeout);
  part.unavailable_at_ = std::min(part.unavailable_at_, unavailable_at_);
  return part;
}

void Deadline::check(std::string_view awaited) {
  if (const int signal = waiter_->wait_until(waiter_->now())) throw Interrupted{signal};
  if (refused()) throw TooLate{};
  if (passed()) throw Failure("no " + std::string(awaited) + " within " + describe(timeout_));
}

void Deadline::pause(std::chrono::nanoseconds duration) {
  const std::chrono::nanoseconds now = waiter_->now();
  const std::chrono::nanoseconds until =
      duration > unavailable_at_ - now ? unavailable_at_ : now + duration;
  if (const int signal = waiter_->wait_until(until)) throw Interrupted{signal};
}

void Deadline::wait(std::span<pollfd> fds, std::string_view awaited,
                    std::chrono::nanoseconds until) {
  for (pollfd& fd : fds) fd.revents = 0;
  if (const int signal = waiter_->wait_until(std::min({until, unavailable_at_, refused_at_}), fds))
    throw Interrupted{signal};
  if (std::none_of(fds.begin(), fds.end(), [](const pollfd& fd) { return fd.revents != 0; }))
    check(awaited);
}

void Connection::FreeReader::operator()(redisReader* reader) const { ::redisReaderFree(reader); }

template <typename Step>
auto Connection::closing_on_failure(Step step) {
  try {
    std::optional<SigpipeBlocked> sigpipe_blocked;
    if (tls_) sigpipe_blocked.emplace();
    return step();
  } catch (const TransportLost& lost) {
    transport_.reset();
    throw ConnectionLost("Redis at " + shown_url_ + ": " + lost.what(), lost.sent);
  } catch (const NotListening& refused) {
    transport_.reset();
    throw ConnectionLost("Redis at " + shown_url_ + ": " + refused.what(), false);
  } catch (const Failure& failure) {
    transport_.reset();
    throw StoreUnavailable("Redis at " + shown_url_ + ": " + failure.what());
  } catch (...) {
    transport_.reset();
    throw;
  }
}

Connection::Connection(const Address& address, const Tls* tls, Deadline& deadline)
    : shown_url_(address.shown), tls_(address.tls) {
  closing_on_failure([&] {
    deadline.check("connection");
    io::FileDescriptor socket = connect_socket(address, deadline);
    transport_ = address.tls ? tls_transport(std::move(socket), *tls, address, deadline)
                             : plain_transport(std::move(socket));
    reader_.reset(::redisReaderCreate());
    if (!reader_) throw std::bad_alloc();
  });
  auto handshake = [&](const std::vector<std::string>& arguments) {
    const Value reply = command(arguments, deadline);
    if (reply.type == Value::Type::error) {
      transport_.reset();
      throw Refused("Redis at " + shown_url_ + ": " + reply.text);
    }
  };
  if (!address.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!address.user.empty()) auth.push_back(address.user);
    auth.push_back(address.password);
    handshake(auth);
  }
  if (address.database != 0) handshake({"SELECT", std::to_string(address.database)});
}

Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

Value Connection::command(const std::vector<std::string>& arguments, Deadline& deadline) {
  return std::move(pipeline({arguments}, deadline).front());
}

std::vector<Value> Connection::pipeline(const std::vector<std::vector<std::string>>& commands,
                                        Deadline& deadline) {
  if (!transport_) throw StoreUnavailable("Redis at " + shown_url_ + ": the connection was lost");
  // Refused before a byte went out: no reply to wait for, so the connection stays open for the
  // next call (the agent, serving callers whose --try passed while they queued, would otherwise
  // connect again for each).
  if (deadline.refused()) throw TooLate{};
  return closing_on_failure([&] {
    deadline.check("reply");
    if (answered_) check_still_open();
    std::string out;
    for (const std::vector<std::string>& arguments : commands) out += resp_command(arguments);
    send(out, deadline);
    std::vector<Value> replies;
    for (std::size_t i = 0; i < commands.size(); ++i) replies.push_back(receive_reply(deadline));
    return replies;
  });
}

void Connection::check_still_open() {
  std::array<char, 512> buffer;
  short wanted = 0;
  // Bytes nobody asked for: kept for the reader, as before this look.
  receive_into(*transport_, *reader_, buffer, wanted, false);
}

void Connection::send(std::string_view data, Deadline& deadline) {
  while (!data.empty()) {
    short wanted = 0;
    std::size_t sent = 0;
    try {
      sent = transport_->send(data, wanted);
    } catch (const Failure& failure) {
      // Not all of the command went out: the server cannot have run it.
      throw TransportLost(failure, false);
    }
    data.remove_prefix(sent);
    if (sent == 0) {
      pollfd ready{.fd = transport_->fd(), .events = wanted, .revents = 0};
      deadline.wait({&ready, 1}, "reply");
    }
  }
}

Value Connection::receive_reply(Deadline& deadline) {
  std::array<char, 16384> buffer;
  while (true) {
    void* reply = nullptr;
    if (::redisReaderGetReply(reader_.get(), &reply) != REDIS_OK) throw Failure(reader_->errstr);
    if (reply != nullptr) {
      Value value = copy_reply(*static_cast<redisReply*>(reply));
      ::freeReplyObject(reply);
      answered_ = true;
      return value;
    }
    // Read before any wait: TLS may hold bytes already that no poll would announce.
    short wanted = 0;
    if (receive_into(*transport_, *reader_, buffer, wanted, true) > 0) continue;
    pollfd ready{.fd = transport_->fd(), .events = wanted, .revents = 0};
    deadline.wait({&ready, 1}, "reply");
  }
}

}  // namespace ratelimit::stores::redis
