#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "io/posix.hpp"
#include "stores/redis/redis_connection.hpp"
#include "stores/redis/redis_url.hpp"

// What carries a connection's bytes, beneath the protocol: a plain socket or TLS over it. Every
// wait goes through the operation's Deadline.
namespace ratelimit::stores::redis {

// Why a server cannot be reached or answer (StoreUnavailable's cause, without the URL).
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The server refused the connection, reset it while it was made, or its socket is gone: nothing
// listens there now, as while a server restarts. It never ran anything of ours.
class NotListening : public Failure {
 public:
  using Failure::Failure;
};

// A byte stream to a server whose calls never block. Each moves what it can at once: the number
// of bytes, or 0 with `wanted` set to the poll events (POLLIN, POLLOUT) to wait for on fd()
// before calling again. Throws Failure when the stream fails or the server closed it.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int fd() const = 0;
  virtual std::size_t send(std::string_view data, short& wanted) = 0;
  virtual std::size_t receive(std::span<char> buffer, short& wanted) = 0;
};

// A non-blocking socket connected to `address`: its unix socket, or its host resolved (from
// /etc/hosts and the name servers of /etc/resolv.conf, no NSS) and each of its addresses tried in
// turn. Throws NotListening when every address refused it, Failure for any other
// failure, or as Deadline does.
io::FileDescriptor connect_socket(const Address& address, Deadline& deadline);

std::unique_ptr<Transport> plain_transport(io::FileDescriptor socket);

// TLS over `socket` once the handshake is done: SNI and the certificate checked for
// `address.host` (a name or an IP address), unless `tls` does not verify.
std::unique_ptr<Transport> tls_transport(io::FileDescriptor socket, const Tls& tls,
                                         const Address& address, Deadline& deadline);

}  // namespace ratelimit::stores::redis
