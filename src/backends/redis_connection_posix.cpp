#include <hiredis/hiredis.h>
#include <signal.h>

#include <cerrno>
#include <cstring>

#include "backends/redis_connection.hpp"
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

timeval to_timeval(std::chrono::milliseconds duration) {
  return {.tv_sec = static_cast<time_t>(duration.count() / 1000),
          .tv_usec = static_cast<suseconds_t>(duration.count() % 1000 * 1000)};
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

RedisConnection::RedisConnection(const RedisAddress& address, std::chrono::milliseconds timeout)
    : shown_url_(address.shown), timeout_(timeout) {
  const timeval limit = to_timeval(timeout);
  int connect_errno = 0;
  {
    const SigpipeBlocked sigpipe_blocked;
    errno = 0;
    context_.reset(address.kind == RedisAddress::Kind::tcp
                       ? ::redisConnectWithTimeout(address.host.c_str(), address.port, limit)
                       : ::redisConnectUnixWithTimeout(address.socket_path.c_str(), limit));
    connect_errno = errno;
  }
  if (!context_) fail("out of memory");
  if (context_->err) {
    const bool timed_out = context_->err == REDIS_ERR_IO && connect_errno == ETIMEDOUT;
    fail(timed_out ? "no connection within " + describe(timeout) : context_->errstr);
  }
  if (::redisSetTimeout(context_.get(), limit) != REDIS_OK) fail(context_->errstr);
  if (!address.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!address.user.empty()) auth.push_back(address.user);
    auth.push_back(address.password);
    const RedisValue reply = command(auth);
    if (reply.type == RedisValue::Type::error) fail(reply.text);
  }
  if (address.database != 0) {
    const RedisValue reply = command({"SELECT", std::to_string(address.database)});
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

RedisValue RedisConnection::command(const std::vector<std::string>& arguments) {
  if (!context_) fail("the connection was lost");
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  for (const std::string& argument : arguments) {
    pointers.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  redisReply* reply = nullptr;
  int call_errno = 0;
  {
    const SigpipeBlocked sigpipe_blocked;
    errno = 0;
    reply = static_cast<redisReply*>(::redisCommandArgv(
        context_.get(), static_cast<int>(arguments.size()), pointers.data(), lengths.data()));
    call_errno = errno;
  }
  if (reply == nullptr) {
    // hiredis's blocking read gives up with EAGAIN once SO_RCVTIMEO expires.
    const bool timed_out =
        context_->err == REDIS_ERR_IO && (call_errno == EAGAIN || call_errno == EWOULDBLOCK);
    fail(timed_out ? "no reply within " + describe(timeout_) : context_->errstr);
  }
  RedisValue value = copy(*reply);
  ::freeReplyObject(reply);
  return value;
}

}  // namespace ratelimit::backends
