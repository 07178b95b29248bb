#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "errors.hpp"
#include "io/waiter.hpp"
#include "stores/redis/redis_url.hpp"

struct redisReader;
struct ssl_ctx_st;

// A client of a Redis server: hiredis for the protocol (its reply reader and command formatting),
// over a transport of ours (redis_connection_transport.hpp): a plain socket or TLS. Its POSIX
// side is redis_connection_posix.cpp.
namespace ratelimit::stores::redis {

class Transport;

// A reply, copied out of hiredis's.
struct Value {
  enum class Type { nil, integer, string, status, error, array };
  Type type = Type::nil;
  long long integer = 0;
  std::string text;  // string, status and error
  std::vector<Value> elements;
};

// Whether `value` carries text: a string or a status reply.
inline bool is_text(const Value& value) {
  return value.type == Value::Type::string || value.type == Value::Type::status;
}

// Thrown by a call that a stop signal cut short. One that came while a command's reply was
// awaited closes the connection, and the command may have run.
struct Interrupted {
  int signal;
};

// Thrown by a call whose request's deadline (Deadline::refuse_after) passed before it got
// its answer; as for Interrupted, the connection is closed and the command may have run, unless
// the deadline had passed before the command was sent (the connection is then kept, as it was).
struct TooLate {};

// A connection that the server or the network ended (a restart, CLIENT KILL, a proxy's idle
// timeout, a reset), as against one that timed out. Whether the command had gone out decides what
// sending it again may cost.
class ConnectionLost : public StoreUnavailable {
 public:
  ConnectionLost(const std::string& what, bool sent) : StoreUnavailable(what), sent_(sent) {}
  // False: the server cannot have run the command (the connection was found closed before it
  // went out, or it did not go out whole). True: it went out, and only its reply was lost.
  bool sent() const { return sent_; }

 private:
  bool sent_;
};

// The one deadline of one operation of ratelimit's on Redis (a reservation, a status, a reset):
// resolving the host, connecting, the TLS handshake, AUTH, SELECT and every command and reply of
// the operation all count against it, so --redis-timeout bounds the whole, not each step.
class Deadline {
 public:
  // `timeout` from now on: past it the server is unavailable. Waits go through `waiter`, so a
  // stop signal ends them (Interrupted); without one, no signal cuts them short.
  explicit Deadline(std::chrono::milliseconds timeout, io::Waiter* waiter = nullptr);

  // Past `deadline` too (on the waiter's timeline), the call is refused (TooLate) instead:
  // the request's own deadline, when it ends before the timeout.
  void refuse_after(std::chrono::nanoseconds deadline) { refused_at_ = deadline; }
  // `timeout` from now on, for the same request: its waiter, and refused as this one is.
  Deadline renewed(std::chrono::milliseconds timeout) const;
  // The same, but never later than this one: one step's part of a search.
  Deadline share(std::chrono::milliseconds timeout) const;
  // The request's failover budget: `failover_timeout` from the first time any deadline of the
  // request (this one, those renewed or shared from it, and their copies) asked for it, so that a
  // request spends one budget however many failovers it meets, connecting or sending, and however
  // often it is tried again. Refused as this one is.
  Deadline failover_budget(std::chrono::milliseconds failover_timeout) const;

  io::Waiter& waiter() { return *waiter_; }
  // When the call is refused (refuse_after; nanoseconds::max(): never), and when the server
  // counts as unavailable, on the waiter's timeline: what a relayed command carries to the agent.
  std::chrono::nanoseconds refused_at() const { return refused_at_; }
  std::chrono::nanoseconds unavailable_at() const { return unavailable_at_; }
  // Whether the timeout has run out (the server is unavailable now).
  bool passed() const { return waiter_->now() >= unavailable_at_; }
  // Whether the call is refused now (TooLate): its request's deadline has passed, before the
  // timeout.
  bool refused() const { return waiter_->now() >= refused_at_ && refused_at_ <= unavailable_at_; }
  // Waits `duration`, or until the timeout runs out, whichever is sooner (Interrupted for a
  // stop signal).
  void pause(std::chrono::nanoseconds duration);
  // Throws Interrupted for a stop signal that came, TooLate or StoreUnavailable's
  // cause ("no AWAITED within 300ms", a Failure) for a deadline that passed.
  void check(std::string_view awaited);
  // Waits until one of `fds` is ready or until `until`, whichever comes first, then throws as
  // check() unless one is ready.
  void wait(std::span<pollfd> fds, std::string_view awaited,
            std::chrono::nanoseconds until = std::chrono::nanoseconds::max());

 private:
  io::Waiter* waiter_;
  std::chrono::milliseconds timeout_;
  std::chrono::nanoseconds unavailable_at_;
  std::chrono::nanoseconds refused_at_ = std::chrono::nanoseconds::max();
  // When the request's failover budget ends, once one was asked for; shared by its deadlines.
  std::shared_ptr<std::optional<std::chrono::nanoseconds>> failover_ends_ =
      std::make_shared<std::optional<std::chrono::nanoseconds>>();
};

class TlsSessionCache;

// The TLS settings of every connection to a rediss:// server, loaded once: the CAs trusted, this
// client's certificate and key, and the sessions kept in options.session_dir (a directory that is
// not safe keeps none: `notify` is told why, as it is told of each session resumed). Throws
// InputError for a file that cannot be read (or is no regular file: a FIFO would hang the read),
// UsageError for one that holds no certificate or key OpenSSL can use.
class Tls {
 public:
  explicit Tls(
      const TlsOptions& options,
      std::function<void(const std::string&)> notify = [](const std::string&) {});
  Tls(Tls&&) noexcept;
  Tls& operator=(Tls&&) noexcept;
  ~Tls();

  ssl_ctx_st* context() const { return context_.get(); }
  bool verify() const { return verify_; }
  // --redis-tls-ca's file; empty: the system's store.
  const std::string& ca_file() const { return ca_file_; }
  // None when sessions are not kept. Shared with the connections, which may outlive a move.
  const std::shared_ptr<const TlsSessionCache>& sessions() const { return sessions_; }

 private:
  void keep_sessions(const TlsOptions& options, std::string trust,
                     std::function<void(const std::string&)> notify);

  struct FreeContext {
    void operator()(ssl_ctx_st* context) const;
  };
  std::unique_ptr<ssl_ctx_st, FreeContext> context_;
  bool verify_ = true;
  std::string ca_file_;
  std::shared_ptr<const TlsSessionCache> sessions_;
};

// Thrown when a server answered the handshake (AUTH, SELECT) with an error: it is there and
// refuses this client, which waiting does not mend.
class Refused : public StoreUnavailable {
 public:
  using StoreUnavailable::StoreUnavailable;
};

// One connection to a server, authenticated and on its database.
class Connection {
 public:
  // Connects to `address` (over TLS with `tls`, required for a rediss:// address) within
  // `deadline`. Throws StoreUnavailable naming the URL (password hidden) and the cause
  // (Refused for a refused handshake), or as Deadline does.
  Connection(const Address& address, const Tls* tls, Deadline& deadline);
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  // Sends one command and waits for its reply within `deadline`; an error reply is returned, not
  // thrown. Throws StoreUnavailable if the server cannot be reached or does not answer in time,
  // ConnectionLost if it ended the connection, or as Deadline does; the connection is
  // then closed and the command's effect unknown (unless ConnectionLost says it was not
  // sent), and every later command throws. A stop signal or a deadline past before the command is
  // sent: nothing is sent. A connection idle since its last reply is looked at first, without
  // waiting: one the server closed meanwhile is reported as lost before anything is sent.
  Value command(const std::vector<std::string>& arguments, Deadline& deadline);
  // The same for several commands sent in one write (a pipeline), their replies in order: what
  // goes wrong goes wrong for all of them.
  std::vector<Value> pipeline(const std::vector<std::vector<std::string>>& commands,
                              Deadline& deadline);
  // False once a command failed.
  bool open() const { return transport_ != nullptr; }

 private:
  // Runs `step`; whatever it throws closes the connection, a Failure as StoreUnavailable.
  template <typename Step>
  auto closing_on_failure(Step step);
  // Throws ConnectionLost (not sent) if the server closed the connection since the last
  // reply.
  void check_still_open();
  void send(std::string_view data, Deadline& deadline);
  Value receive_reply(Deadline& deadline);

  struct FreeReader {
    void operator()(redisReader* reader) const;
  };
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<redisReader, FreeReader> reader_;
  std::string shown_url_;
  // Over TLS: OpenSSL writes to the socket with write(2), which raises SIGPIPE.
  bool tls_;
  // A reply came on it: from then on, what it receives between commands can only be its end.
  bool answered_ = false;
};

}  // namespace ratelimit::stores::redis
