#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

struct ssl_session_st;

// TLS sessions kept between processes so that the next connection to a rediss:// server resumes
// one instead of making a full handshake (a server's public-key operation, the bulk of its CPU
// per connection): what a session is kept under, and how its file is written and read back. No
// I/O; the files are kept in the state directory by redis_connection_tls_posix.cpp.
namespace ratelimit::stores::redis {

// What a session was made and checked for. A session is offered again only within the same
// scope: the same server under the same name, the same CAs trusted the same way, the same client
// certificate shown. A resumed session skips the server's certificate, so a session from another
// scope would skip a check that scope makes.
struct TlsSessionScope {
  std::string host;  // as the URL names it: a name or an IP address
  int port = 0;
  std::string server_name;  // the SNI sent: the host when it is a name, else empty
  bool verify = true;       // false: --redis-tls-insecure
  // The CAs trusted and this client's certificate: digests of their files' content, so that
  // another file at the same path is another scope.
  std::string trust;
};

// The SHA-256 of `bytes`, in hexadecimal.
std::string sha256_hex(std::string_view bytes);

// What the names of the files that keep sessions start with.
inline constexpr std::string_view kTlsSessionFilePrefix = "tls-session-";

// The name of the file that keeps the session of `scope`: kTlsSessionFilePrefix and 32
// hexadecimal digits of a digest of the whole scope.
std::string tls_session_file_name(const TlsSessionScope& scope);

struct FreeSslSession {
  void operator()(ssl_session_st* session) const;
};
using SslSession = std::unique_ptr<ssl_session_st, FreeSslSession>;

// The content of the file that keeps `session` for `scope`: a line naming the format and the
// scope's digest, then the session in PEM.
std::string encode_tls_session(ssl_session_st* session, const TlsSessionScope& scope);

// The session in `bytes` (a file's content) if it may be offered within `scope` at `now`
// (seconds since the epoch): in the format, kept for that scope, resumable, not expired, not
// made for another server name, and, when the scope verifies, with a server certificate that is
// still for the host and still valid. Else nullptr, and `ignored_because` says why.
SslSession decode_tls_session(std::string_view bytes, const TlsSessionScope& scope, std::time_t now,
                              std::string& ignored_because);

}  // namespace ratelimit::stores::redis
