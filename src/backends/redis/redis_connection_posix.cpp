#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "backends/redis/redis_connection.hpp"
#include "errors.hpp"
#include "io/posix.hpp"

namespace ratelimit::backends {
namespace {

// While alive, SIGPIPE is blocked in this thread, and one raised by a write to a connection the
// server closed is taken back before the mask is restored: a dropped connection is an error
// return (EPIPE), never the death of the process, and the disposition is left as it was (a
// command that `exec` runs inherits it).
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &sigpipe_, &previous_mask_);
    was_pending_ = pending();
  }
  ~SigpipeBlocked() {
    if (!was_pending_ && pending()) {
      const timespec no_wait{};
      io::retry_on_eintr([&] { return ::sigtimedwait(&sigpipe_, nullptr, &no_wait); });
    }
    ::pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  static bool pending() {
    sigset_t set;
    ::sigpending(&set);
    return sigismember(&set, SIGPIPE) == 1;
  }
  sigset_t sigpipe_;
  sigset_t previous_mask_;
  bool was_pending_ = false;
};

// A stop signal that came before a step (connecting, sending a command) ends the call there.
void stop_if_signalled(io::Waiter* stop_waiter) {
  if (stop_waiter == nullptr) return;
  if (const int signal = stop_waiter->wait_until(stop_waiter->now()))
    throw RedisInterrupted{signal};
}

timeval to_timeval(std::chrono::milliseconds duration) {
  return {.tv_sec = static_cast<time_t>(duration.count() / 1000),
          .tv_usec = static_cast<suseconds_t>(duration.count() % 1000 * 1000)};
}

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

RedisValue copy(const redisReply& reply) {
  RedisValue value;
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      value.type = RedisValue::Type::integer;
      value.integer = reply.integer;
      break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      value.type = reply.type == REDIS_REPLY_STRING   ? RedisValue::Type::string
                   : reply.type == REDIS_REPLY_STATUS ? RedisValue::Type::status
                                                      : RedisValue::Type::error;
      value.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_ARRAY:
      value.type = RedisValue::Type::array;
      for (std::size_t i = 0; i < reply.elements; ++i)
        value.elements.push_back(copy(*reply.element[i]));
      break;
    default:
      value.type = RedisValue::Type::nil;
  }
  return value;
}

}  // namespace

void RedisConnection::FreeContext::operator()(redisContext* context) const { ::redisFree(context); }

RedisConnection::RedisConnection(const RedisAddress& address, std::chrono::milliseconds timeout,
                                 io::Waiter* stop_waiter)
    : shown_url_(address.shown), timeout_(timeout) {
  stop_if_signalled(stop_waiter);
  io::UninterruptedWaiter uninterrupted;
  io::Waiter& waiter = stop_waiter != nullptr ? *stop_waiter : uninterrupted;
  const std::chrono::nanoseconds deadline = deadline_after(waiter.now(), timeout);
  // Started without blocking and waited for through the waiter, so that a stop signal ends the
  // wait for a host that does not answer at once; then blocking, as command() expects.
  {
    const SigpipeBlocked sigpipe_blocked;
    context_.reset(address.kind == RedisAddress::Kind::tcp
                       ? ::redisConnectNonBlock(address.host.c_str(), address.port)
                       : ::redisConnectUnixNonBlock(address.socket_path.c_str()));
  }
  if (!context_) fail("out of memory");
  if (context_->err) fail(context_->errstr);
  while (true) {
    pollfd writable{.fd = context_->fd, .events = POLLOUT, .revents = 0};
    if (const int signal = waiter.wait_until(deadline, {&writable, 1})) {
      context_.reset();
      throw RedisInterrupted{signal};
    }
    if (writable.revents != 0) break;
    if (waiter.now() >= deadline) fail("no connection within " + describe(timeout));
  }
  int connect_error = 0;
  socklen_t length = sizeof connect_error;
  if (::getsockopt(context_->fd, SOL_SOCKET, SO_ERROR, &connect_error, &length) != 0)
    connect_error = errno;
  if (connect_error != 0) fail(std::strerror(connect_error));
  const int flags = ::fcntl(context_->fd, F_GETFL);
  if (flags < 0 || ::fcntl(context_->fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
    fail(std::strerror(errno));
  context_->flags |= REDIS_BLOCK;
  if (::redisSetTimeout(context_.get(), to_timeval(timeout)) != REDIS_OK) fail(context_->errstr);
  if (!address.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!address.user.empty()) auth.push_back(address.user);
    auth.push_back(address.password);
    const RedisValue reply = command(auth, stop_waiter);
    if (reply.type == RedisValue::Type::error) fail(reply.text);
  }
  if (address.database != 0) {
    const RedisValue reply = command({"SELECT", std::to_string(address.database)}, stop_waiter);
    if (reply.type == RedisValue::Type::error) fail(reply.text);
  }
}

RedisConnection::RedisConnection(RedisConnection&&) noexcept = default;
RedisConnection& RedisConnection::operator=(RedisConnection&&) noexcept = default;
RedisConnection::~RedisConnection() = default;

void RedisConnection::fail(const std::string& cause) {
  context_.reset();
  throw BackendUnavailable("Redis at " + shown_url_ + ": " + cause);
}

RedisValue RedisConnection::command(const std::vector<std::string>& arguments,
                                    io::Waiter* stop_waiter) {
  if (!context_) fail("the connection was lost");
  stop_if_signalled(stop_waiter);
  io::UninterruptedWaiter uninterrupted;
  io::Waiter& waiter = stop_waiter != nullptr ? *stop_waiter : uninterrupted;
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  for (const std::string& argument : arguments) {
    pointers.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  redisContext* const context = context_.get();
  if (::redisAppendCommandArgv(context, static_cast<int>(arguments.size()), pointers.data(),
                               lengths.data()) != REDIS_OK)
    fail(context->errstr);
  const std::chrono::nanoseconds reply_deadline = deadline_after(waiter.now(), timeout_);
  // The socket stays blocking for the write, bounded by the send timeout that redisSetTimeout
  // set: a command is at most the script's 13 kB, sent on a connection with nothing else in
  // flight (each reply is read whole, a connection that lost one is closed), so the socket
  // buffer takes it at once whether or not the server reads. Only the wait for the reply can be
  // long, and it goes through the waiter. A non-blocking socket would contradict the blocking
  // context hiredis keeps (its reads and writes take EAGAIN for an error there).
  int write_errno = 0;
  {
    const SigpipeBlocked sigpipe_blocked;
    int done = 0;
    while (!done) {
      errno = 0;
      if (::redisBufferWrite(context, &done) != REDIS_OK) {
        write_errno = errno;
        break;
      }
    }
  }
  if (context->err) {
    // The send timeout expired: EAGAIN.
    const bool timed_out = write_errno == EAGAIN || write_errno == EWOULDBLOCK;
    fail(timed_out ? "no reply within " + describe(timeout_) : context->errstr);
  }
  void* reply = nullptr;
  while (true) {
    if (::redisGetReplyFromReader(context, &reply) != REDIS_OK) fail(context->errstr);
    if (reply != nullptr) break;
    pollfd readable{.fd = context->fd, .events = POLLIN, .revents = 0};
    if (const int signal = waiter.wait_until(reply_deadline, {&readable, 1})) {
      // The server may have run the command: its reply is never waited for, nor the command
      // sent again.
      context_.reset();
      throw RedisInterrupted{signal};
    }
    if (readable.revents != 0) {
      // Readable, so the blocking read returns what came (or the end, or the error) at once.
      if (::redisBufferRead(context) != REDIS_OK) fail(context->errstr);
    } else if (waiter.now() >= reply_deadline) {
      fail("no reply within " + describe(timeout_));
    }
  }
  RedisValue value = copy(*static_cast<redisReply*>(reply));
  ::freeReplyObject(reply);
  return value;
}

}  // namespace ratelimit::backends
