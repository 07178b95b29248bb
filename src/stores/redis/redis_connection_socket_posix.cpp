#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stores/redis/redis_connection_transport.hpp"

namespace ratelimit::stores::redis {
namespace {

struct FreeAddresses {
  void operator()(ares_addrinfo* addresses) const { ::ares_freeaddrinfo(addresses); }
};
using Addresses = std::unique_ptr<ares_addrinfo, FreeAddresses>;

struct DestroyChannel {
  void operator()(ares_channel channel) const { ::ares_destroy(channel); }
};

// An answer of c-ares, which calls back into it from ares_process_fd() or, at destruction of the
// channel, with ARES_EDESTRUCTION: it must outlive the channel.
struct Lookup {
  bool done = false;
  int status = ARES_SUCCESS;
  Addresses addresses;
};

void on_lookup(void* argument, int status, int /*timeouts*/, ares_addrinfo* result) {
  Lookup& lookup = *static_cast<Lookup*>(argument);
  lookup.done = true;
  lookup.status = status;
  lookup.addresses.reset(result);
}

// The addresses of `host` for TCP port `port`, by c-ares: a static binary has no NSS for
// getaddrinfo, and c-ares's sockets can be waited for through the deadline, so a name server that
// does not answer is given up at --redis-timeout or at a stop signal.
Addresses resolve(const std::string& host, int port, Deadline& deadline) {
  static const int initialized = ::ares_library_init(ARES_LIB_INIT_ALL);
  if (initialized != ARES_SUCCESS) throw Failure(::ares_strerror(initialized));
  Lookup lookup;
  ares_channel raw_channel = nullptr;
  if (const int status = ::ares_init(&raw_channel); status != ARES_SUCCESS)
    throw Failure("cannot resolve " + host + ": " + ::ares_strerror(status));
  const std::unique_ptr<ares_channeldata, DestroyChannel> channel(raw_channel);
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ARES_AI_NUMERICSERV;
  ::ares_getaddrinfo(channel.get(), host.c_str(), std::to_string(port).c_str(), &hints, on_lookup,
                     &lookup);
  const std::string awaited = "address for " + host;
  while (!lookup.done) {
    std::array<ares_socket_t, ARES_GETSOCK_MAXNUM> sockets{};
    const int wanted = ::ares_getsock(channel.get(), sockets.data(), ARES_GETSOCK_MAXNUM);
    std::vector<pollfd> fds;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      const short events = static_cast<short>((ARES_GETSOCK_READABLE(wanted, i) ? POLLIN : 0) |
                                              (ARES_GETSOCK_WRITABLE(wanted, i) ? POLLOUT : 0));
      if (events != 0) fds.push_back({.fd = sockets[i], .events = events, .revents = 0});
    }
    timeval next_timeout{};
    const std::chrono::nanoseconds now = deadline.waiter().now();
    const std::chrono::nanoseconds until =
        ::ares_timeout(channel.get(), nullptr, &next_timeout) == nullptr
            ? std::chrono::nanoseconds::max()
            : now + std::chrono::seconds(next_timeout.tv_sec) +
                  std::chrono::microseconds(next_timeout.tv_usec);
    deadline.wait(fds, awaited, until);
    bool any_ready = false;
    for (const pollfd& fd : fds) {
      if (fd.revents == 0) continue;
      any_ready = true;
      ::ares_process_fd(channel.get(), (fd.revents & ~POLLOUT) != 0 ? fd.fd : ARES_SOCKET_BAD,
                        (fd.revents & POLLOUT) != 0 ? fd.fd : ARES_SOCKET_BAD);
    }
    // Its own timeouts: a query sent again, or to the next server.
    if (!any_ready) ::ares_process_fd(channel.get(), ARES_SOCKET_BAD, ARES_SOCKET_BAD);
  }
  if (lookup.status != ARES_SUCCESS)
    throw Failure("cannot resolve " + host + ": " + ::ares_strerror(lookup.status));
  return std::move(lookup.addresses);
}

// `host` as an IPv4 or IPv6 address, if it is written as one: no lookup, no name server asked.
std::optional<sockaddr_storage> numeric_address(const std::string& host, int port) {
  sockaddr_storage storage{};
  auto* const ipv4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* const ipv6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (::inet_pton(AF_INET, host.c_str(), &ipv4->sin_addr) == 1) {
    ipv4->sin_family = AF_INET;
    ipv4->sin_port = htons(static_cast<std::uint16_t>(port));
  } else if (::inet_pton(AF_INET6, host.c_str(), &ipv6->sin6_addr) == 1) {
    ipv6->sin6_family = AF_INET6;
    ipv6->sin6_port = htons(static_cast<std::uint16_t>(port));
  } else {
    return std::nullopt;
  }
  return storage;
}

// A socket connected to `address`, or none and `error` the errno of the refusal.
io::FileDescriptor connect_to(const sockaddr* address, socklen_t length, Deadline& deadline,
                              int& error) {
  io::FileDescriptor socket(
      ::socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket) throw Failure(std::strerror(errno));
  if (io::retry_on_eintr([&] { return ::connect(socket.get(), address, length); }) != 0) {
    if (errno != EINPROGRESS) {
      error = errno;
      return {};
    }
    pollfd writable{.fd = socket.get(), .events = POLLOUT, .revents = 0};
    do {
      deadline.wait({&writable, 1}, "connection");
    } while (writable.revents == 0);
    socklen_t size = sizeof error;
    if (::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
    if (error != 0) return {};
  }
  if (address->sa_family != AF_UNIX) {
    // A command goes out in one write and its reply is awaited: no delay for more to come.
    const int on = 1;
    ::setsockopt(socket.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  }
  return socket;
}

// The failure of a connection that `error` (an errno) refused.
[[noreturn]] void throw_refusal(int error) {
  // Refused or reset: the host is there and nothing listens on the port (yet). No such file: a
  // unix socket that its server removed as it ended.
  if (error == ECONNREFUSED || error == ECONNRESET || error == ENOENT)
    throw NotListening(std::strerror(error));
  throw Failure(std::strerror(error));
}

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(io::FileDescriptor socket)
      : socket_(std::move(socket)), may_speak_tls_(!is_unix_socket(socket_.get())) {}
  int fd() const override { return socket_.get(); }

  std::size_t send(std::string_view data, short& wanted) override {
    const ssize_t sent = io::retry_on_eintr(
        [&] { return ::send(socket_.get(), data.data(), data.size(), MSG_NOSIGNAL); });
    return moved(sent, POLLOUT, wanted);
  }
  std::size_t receive(std::span<char> buffer, short& wanted) override {
    const ssize_t received =
        io::retry_on_eintr([&] { return ::read(socket_.get(), buffer.data(), buffer.size()); });
    if (received == 0) throw Failure(unanswered("the server closed the connection"));
    if (received < 0 && errno == ECONNRESET) throw Failure(unanswered(std::strerror(errno)));
    if (received > 0) answered_ = true;
    return moved(received, POLLIN, wanted);
  }

 private:
  static bool is_unix_socket(int fd) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    return ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
           address.ss_family == AF_UNIX;
  }
  // `cause` of a connection that ended, with a hint when it ended unanswered: a TLS port closes a
  // plain connection at its first command without a word (a reset, or the end of the stream),
  // where a Redis server says why before it closes one (maxclients, protected mode).
  std::string unanswered(std::string cause) const {
    if (answered_ || !may_speak_tls_) return cause;
    return cause + " before any reply: if this port speaks TLS, use rediss://";
  }

  static std::size_t moved(ssize_t result, short blocked_on, short& wanted) {
    if (result >= 0) return static_cast<std::size_t>(result);
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw Failure(std::strerror(errno));
    wanted = blocked_on;
    return 0;
  }
  io::FileDescriptor socket_;
  bool may_speak_tls_;
  bool answered_ = false;
};

}  // namespace

io::FileDescriptor connect_socket(const Address& address, Deadline& deadline) {
  int error = 0;
  if (address.kind == Address::Kind::unix_socket) {
    sockaddr_un unix_address{};
    unix_address.sun_family = AF_UNIX;
    if (address.socket_path.size() >= sizeof unix_address.sun_path)
      throw Failure("the socket path is too long");
    address.socket_path.copy(unix_address.sun_path, sizeof unix_address.sun_path - 1);
    io::FileDescriptor socket = connect_to(reinterpret_cast<const sockaddr*>(&unix_address),
                                           sizeof unix_address, deadline, error);
    if (!socket) throw_refusal(error);
    return socket;
  }
  if (const auto numeric = numeric_address(address.host, address.port)) {
    const auto* const target = reinterpret_cast<const sockaddr*>(&*numeric);
    io::FileDescriptor socket = connect_to(
        target, target->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6), deadline,
        error);
    if (!socket) throw_refusal(error);
    return socket;
  }
  const Addresses addresses = resolve(address.host, address.port, deadline);
  for (const ares_addrinfo_node* node = addresses->nodes; node != nullptr; node = node->ai_next) {
    if (io::FileDescriptor socket = connect_to(node->ai_addr, node->ai_addrlen, deadline, error))
      return socket;
  }
  if (error != 0) throw_refusal(error);
  throw Failure("no address for " + address.host);
}

std::unique_ptr<Transport> plain_transport(io::FileDescriptor socket) {
  return std::make_unique<PlainTransport>(std::move(socket));
}

}  // namespace ratelimit::stores::redis
