#pragma once

#include <string>
#include <string_view>
#include <utility>

// Where a Redis server is, from a URL the user wrote; no I/O.
namespace ratelimit::stores::redis {

// A Redis URL as written (with its password), and as messages show it: its password, if any, as
// "***" (the whole user part when it is malformed, so that even a malformed URL can be shown).
// Made once where the URL is read (--redis, $RATELIMIT_REDIS; the agent: a relayed request) and
// passed along, so that the password is hidden in one place.
struct Url {
  Url() = default;
  // A URL is its text: written where a URL goes, it is read as one.
  Url(std::string written);                                // NOLINT(google-explicit-constructor)
  Url(const char* written) : Url(std::string(written)) {}  // NOLINT
  // A URL made of a part of another (a sentinel's host in a redis-sentinel:// URL), shown as the
  // URL the user wrote.
  Url(std::string written, std::string shown)
      : written(std::move(written)), shown(std::move(shown)) {}

  std::string written;
  std::string shown;
};

struct Address {
  enum class Kind { tcp, unix_socket };
  Kind kind = Kind::tcp;
  bool tls = false;  // rediss://: TCP with TLS, the host name checked against the certificate
  std::string host;  // tcp: a name or an address (IPv6 without brackets)
  int port = 6379;
  std::string socket_path;  // unix_socket
  int database = 0;
  std::string user;      // empty: the default user
  std::string password;  // empty: no AUTH
  // The URL as errors show it: the password, if any, as "***".
  std::string shown;
};

// How a client proves a rediss:// server is the one named, and itself to the server.
struct TlsOptions {
  std::string ca_file;    // the CAs to trust; empty: the system's store
  std::string cert_file;  // this client's certificate (chain); empty: none
  std::string key_file;   // its private key; empty: in cert_file
  bool verify = true;     // false: the server's certificate and name go unchecked
  // The directory that relative file names are in, and are named from: empty, this process's
  // working directory; the agent's client's own (the agent runs in /).
  std::string directory;
  // Where sessions are kept so that the next process resumes one (the state directory); empty:
  // none kept.
  std::string session_dir;
};

// Parses `redis://[[user]:password@]host[:port][/db]` (`rediss://` the same over TLS) and
// `unix://[[user]:password@]/path/redis.sock[?db=N]`; user and password may be %-encoded.
// Throws UsageError naming the URL as shown and what is wrong with it.
Address parse_url(const Url& url);

// A server's error reply as the user can act on it: a server that wants a password (NOAUTH, or the
// protocol error it gives a long command sent without one) says so with the URL form that gives
// one; any other error as it is.
std::string explain_refusal(const std::string& error);

}  // namespace ratelimit::stores::redis
