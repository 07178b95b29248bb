#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "backends/redis/redis_connection_transport.hpp"
#include "errors.hpp"

namespace ratelimit::backends {
namespace {

// OpenSSL's reason for the last failure of this thread, or `fallback`.
std::string openssl_reason(std::string_view fallback) {
  const unsigned long code = ::ERR_peek_last_error();
  ::ERR_clear_error();
  const char* reason = code != 0 ? ::ERR_reason_error_string(code) : nullptr;
  return reason != nullptr ? reason : std::string(fallback);
}

// A file the user named, readable, or InputError naming the option and the file.
void check_readable(std::string_view option, const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(errno, std::string(option) + " " + file);
  ::close(fd);
}

[[noreturn]] void unusable(std::string_view option, const std::string& file) {
  throw UsageError(std::string(option) + " " + file + ": " +
                   openssl_reason("not a PEM file OpenSSL can use"));
}

bool is_ip_address(const std::string& host) {
  std::array<unsigned char, sizeof(in6_addr)> address{};
  return ::inet_pton(AF_INET, host.c_str(), address.data()) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), address.data()) == 1;
}

class TlsTransport final : public RedisTransport {
 public:
  TlsTransport(io::FileDescriptor socket, const RedisTls& tls, const RedisAddress& address)
      : socket_(std::move(socket)), ssl_(::SSL_new(tls.context())) {
    if (!ssl_ || ::SSL_set_fd(ssl_.get(), socket_.get()) != 1)
      throw RedisFailure("TLS: " + openssl_reason("cannot start"));
    SSL_set_app_data(ssl_.get(), this);
    const bool ip_address = is_ip_address(address.host);
    // SNI names a host, never an address (RFC 6066).
    if (!ip_address) ::SSL_set_tlsext_host_name(ssl_.get(), address.host.c_str());
    if (tls.verify()) {
      X509_VERIFY_PARAM* const checks = ::SSL_get0_param(ssl_.get());
      const int set = ip_address ? ::X509_VERIFY_PARAM_set1_ip_asc(checks, address.host.c_str())
                                 : ::X509_VERIFY_PARAM_set1_host(checks, address.host.c_str(), 0);
      if (set != 1) throw RedisFailure("TLS: cannot check the name " + address.host);
    }
  }

  void handshake(RedisDeadline& deadline) {
    while (true) {
      ::ERR_clear_error();
      const int result = ::SSL_connect(ssl_.get());
      if (result == 1) return;
      short wanted = 0;
      settle(result, wanted);
      pollfd ready{.fd = socket_.get(), .events = wanted, .revents = 0};
      deadline.wait({&ready, 1}, "TLS handshake");
    }
  }

  int fd() const override { return socket_.get(); }

  std::size_t send(std::string_view data, short& wanted) override {
    ::ERR_clear_error();
    std::size_t sent = 0;
    const int result = ::SSL_write_ex(ssl_.get(), data.data(), data.size(), &sent);
    if (result == 1) return sent;
    settle(result, wanted);
    return 0;
  }

  std::size_t receive(std::span<char> buffer, short& wanted) override {
    ::ERR_clear_error();
    std::size_t received = 0;
    const int result = ::SSL_read_ex(ssl_.get(), buffer.data(), buffer.size(), &received);
    if (result == 1) {
      answered_ = true;
      return received;
    }
    settle(result, wanted);
    return 0;
  }

  // OpenSSL's callback when the server asks for a certificate and this client has none to give
  // (RedisTls sets it then): it goes on without one, but remembers.
  static int on_certificate_request(SSL* ssl, X509** /*certificate*/, EVP_PKEY** /*key*/) {
    static_cast<TlsTransport*>(SSL_get_app_data(ssl))->certificate_requested_ = true;
    return 0;
  }

 private:
  // After a call that did not complete: what to wait for, or RedisFailure saying why it failed.
  void settle(int result, short& wanted) {
    const int saved_errno = errno;
    switch (::SSL_get_error(ssl_.get(), result)) {
      case SSL_ERROR_WANT_READ:
        wanted = POLLIN;
        return;
      case SSL_ERROR_WANT_WRITE:
        wanted = POLLOUT;
        return;
      case SSL_ERROR_ZERO_RETURN:
        throw RedisFailure("the server closed the connection");
      case SSL_ERROR_SYSCALL:
        if (::ERR_peek_last_error() == 0)
          throw RedisFailure(saved_errno != 0 ? std::strerror(saved_errno)
                                              : "the server closed the connection");
        break;
      default:
        break;
    }
    // A server that requires a certificate ends the connection once the handshake is over (TLS
    // 1.3): its alert may be lost to the reset that follows, so the request explains it.
    if (certificate_requested_ && !answered_)
      throw RedisFailure("TLS: the server requires a client certificate (--redis-tls-cert)");
    const long verified = ::SSL_get_verify_result(ssl_.get());
    if (verified != X509_V_OK) {
      ::ERR_clear_error();
      throw RedisFailure(std::string("TLS: the server's certificate is not trusted: ") +
                         ::X509_verify_cert_error_string(verified));
    }
    throw RedisFailure("TLS: " + openssl_reason("failed"));
  }

  struct FreeSsl {
    void operator()(SSL* ssl) const { ::SSL_free(ssl); }
  };
  io::FileDescriptor socket_;
  std::unique_ptr<SSL, FreeSsl> ssl_;
  bool certificate_requested_ = false;
  bool answered_ = false;
};

}  // namespace

void RedisTls::FreeContext::operator()(ssl_ctx_st* context) const { ::SSL_CTX_free(context); }

RedisTls::RedisTls(const RedisTlsOptions& options)
    : context_(::SSL_CTX_new(::TLS_client_method())), verify_(options.verify) {
  if (!context_) throw std::bad_alloc();
  SSL_CTX* const context = context_.get();
  ::SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  // A write may take part of a command (as write(2) does) and be called again with the rest.
  ::SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (options.verify) {
    ::SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
    if (options.ca_file.empty()) {
      if (::SSL_CTX_set_default_verify_paths(context) != 1)
        throw UsageError("the system's CA store: " + openssl_reason("cannot be loaded"));
    } else {
      check_readable("--redis-tls-ca", options.ca_file);
      if (::SSL_CTX_load_verify_locations(context, options.ca_file.c_str(), nullptr) != 1)
        unusable("--redis-tls-ca", options.ca_file);
    }
  }
  if (options.cert_file.empty()) {
    ::SSL_CTX_set_client_cert_cb(context, TlsTransport::on_certificate_request);
  } else {
    check_readable("--redis-tls-cert", options.cert_file);
    if (::SSL_CTX_use_certificate_chain_file(context, options.cert_file.c_str()) != 1)
      unusable("--redis-tls-cert", options.cert_file);
  }
  if (!options.key_file.empty() || !options.cert_file.empty()) {
    const bool own_file = !options.key_file.empty();
    const std::string& key_file = own_file ? options.key_file : options.cert_file;
    const std::string_view option = own_file ? "--redis-tls-key" : "--redis-tls-cert";
    check_readable(option, key_file);
    if (::SSL_CTX_use_PrivateKey_file(context, key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        ::SSL_CTX_check_private_key(context) != 1)
      unusable(option, key_file);
  }
}

RedisTls::RedisTls(RedisTls&&) noexcept = default;
RedisTls& RedisTls::operator=(RedisTls&&) noexcept = default;
RedisTls::~RedisTls() = default;

std::unique_ptr<RedisTransport> tls_transport(io::FileDescriptor socket, const RedisTls& tls,
                                              const RedisAddress& address,
                                              RedisDeadline& deadline) {
  auto transport = std::make_unique<TlsTransport>(std::move(socket), tls, address);
  transport->handshake(deadline);
  return transport;
}

}  // namespace ratelimit::backends
