#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/redis/redis_url.hpp"
#include "io/waiter.hpp"

struct redisContext;

// The Redis client (hiredis) behind a small RAII type; its POSIX side is
// redis_connection_posix.cpp.
namespace ratelimit::backends {

// A reply, copied out of hiredis's.
struct RedisValue {
  enum class Type { nil, integer, string, status, error, array };
  Type type = Type::nil;
  long long integer = 0;
  std::string text;  // string, status and error
  std::vector<RedisValue> elements;
};

// Thrown by a call that a stop signal cut short. One that came while a command's reply was
// awaited closes the connection, and the command may have run.
struct RedisInterrupted {
  int signal;
};

// One connection to a server, authenticated and on its database.
class RedisConnection {
 public:
  // Connects within `timeout`; every command must be answered within it as well. Throws
  // BackendUnavailable naming the URL (password hidden) and the cause. With `stop_waiter`, a stop
  // signal before or while connecting means no connection (RedisInterrupted), and one during AUTH
  // or SELECT ends it as in command().
  RedisConnection(const RedisAddress& address, std::chrono::milliseconds timeout,
                  io::Waiter* stop_waiter = nullptr);
  RedisConnection(RedisConnection&&) noexcept;
  RedisConnection& operator=(RedisConnection&&) noexcept;
  ~RedisConnection();

  // Sends one command and waits for its reply; an error reply is returned, not thrown. Throws
  // BackendUnavailable if the server cannot be reached or does not answer in time; the connection
  // is then closed and the command's effect unknown, and every later command throws. The reply is
  // waited for through `stop_waiter` when given, so a stop signal ends the wait at once
  // (RedisInterrupted; one that came before the command is sent: nothing is sent); otherwise no
  // signal cuts it short.
  RedisValue command(const std::vector<std::string>& arguments, io::Waiter* stop_waiter = nullptr);
  // False once a command failed.
  bool open() const { return context_ != nullptr; }

 private:
  [[noreturn]] void fail(const std::string& cause);

  struct FreeContext {
    void operator()(redisContext* context) const;
  };
  std::unique_ptr<redisContext, FreeContext> context_;
  std::string shown_url_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ratelimit::backends
