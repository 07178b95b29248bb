#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"
#include "state/state_directory.hpp"
#include "stores/redis/redis_connection_transport.hpp"
#include "stores/redis/redis_tls_session.hpp"

namespace ratelimit::stores::redis {
namespace {

// OpenSSL's reason for the last failure of this thread, or `fallback`.
std::string openssl_reason(std::string_view fallback) {
  const unsigned long code = ::ERR_peek_last_error();
  ::ERR_clear_error();
  const char* reason = code != 0 ? ::ERR_reason_error_string(code) : nullptr;
  return reason != nullptr ? reason : std::string(fallback);
}

// Certificates and keys are small; a CA bundle a few hundred KiB.
constexpr std::size_t kLargestPemFile = std::size_t{16} << 20;

// The whole of a file the user named, `file` as written, found in `directory` if relative (empty:
// the working directory): a regular file, opened without blocking (a FIFO there would hang the
// open or the read with no deadline). Throws InputError naming the option and the file.
std::string read_pem_file(std::string_view option, const std::string& file,
                          const std::string& directory) {
  const std::string named = std::string(option) + " " + file;
  const std::string path =
      directory.empty() || file.starts_with('/') ? file : directory + "/" + file;
  const io::FileDescriptor fd(io::retry_on_eintr(
      [&] { return ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY); }));
  if (!fd) throw InputError(errno, named);
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0) throw InputError(errno, named);
  if (S_ISDIR(status.st_mode)) throw InputError(EISDIR, named);
  if (!S_ISREG(status.st_mode)) throw InputError(named + ": not a regular file");
  if (static_cast<std::uintmax_t>(status.st_size) > kLargestPemFile)
    throw UsageError(named + ": too large for a PEM file");
  std::string bytes(static_cast<std::size_t>(status.st_size), '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t count = io::retry_on_eintr(
        [&] { return ::pread(fd.get(), bytes.data() + got, bytes.size() - got, got); });
    if (count < 0) throw InputError(errno, named);
    if (count == 0) break;
    got += static_cast<std::size_t>(count);
  }
  bytes.resize(got);
  return bytes;
}

struct FreeBio {
  void operator()(BIO* bio) const { ::BIO_free(bio); }
};
using Bio = std::unique_ptr<BIO, FreeBio>;

Bio memory_bio(const std::string& bytes) {
  Bio bio(::BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
  if (!bio) throw std::bad_alloc();
  return bio;
}

// The certificates (and CRLs) of --redis-tls-ca's file, trusted. Returns the digest of the file.
std::string trust_cas(SSL_CTX* context, const std::string& file, const std::string& directory) {
  const std::string bytes = read_pem_file("--redis-tls-ca", file, directory);
  const Bio bio = memory_bio(bytes);
  STACK_OF(X509_INFO)* const infos = ::PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr);
  X509_STORE* const store = ::SSL_CTX_get_cert_store(context);
  int trusted = 0;
  for (int i = 0; infos != nullptr && i < sk_X509_INFO_num(infos); ++i) {
    const X509_INFO* const info = sk_X509_INFO_value(infos, i);
    if (info->x509 != nullptr && ::X509_STORE_add_cert(store, info->x509) == 1) ++trusted;
    if (info->crl != nullptr) ::X509_STORE_add_crl(store, info->crl);
  }
  if (infos != nullptr) sk_X509_INFO_pop_free(infos, ::X509_INFO_free);
  ::ERR_clear_error();
  if (trusted == 0) throw UsageError("--redis-tls-ca " + file + ": no PEM certificate in it");
  return sha256_hex(bytes);
}

// --redis-tls-cert's certificate and the chain after it. Returns the digest of the file.
std::string use_certificate_chain(SSL_CTX* context, const std::string& file,
                                  const std::string& directory) {
  const std::string bytes = read_pem_file("--redis-tls-cert", file, directory);
  const Bio bio = memory_bio(bytes);
  X509* const certificate = ::PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr);
  const bool used = certificate != nullptr && ::SSL_CTX_use_certificate(context, certificate) == 1;
  ::X509_free(certificate);
  if (!used) {
    ::ERR_clear_error();
    throw UsageError("--redis-tls-cert " + file + ": no PEM certificate in it");
  }
  while (X509* const link = ::PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (::SSL_CTX_add0_chain_cert(context, link) != 1) {
      ::X509_free(link);
      throw UsageError("--redis-tls-cert " + file + ": " + openssl_reason("a bad chain"));
    }
  }
  ::ERR_clear_error();  // the end of the file, found as "no start line"
  return sha256_hex(bytes);
}

// The private key of --redis-tls-cert, from `file` (`option` names where it came from).
void use_private_key(SSL_CTX* context, std::string_view option, const std::string& file,
                     const std::string& cert_file, const std::string& directory) {
  const std::string bytes = read_pem_file(option, file, directory);
  const Bio bio = memory_bio(bytes);
  EVP_PKEY* const key = ::PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  // Using a key checks it against the certificate.
  const bool used = key != nullptr && ::SSL_CTX_use_PrivateKey(context, key) == 1 &&
                    ::SSL_CTX_check_private_key(context) == 1;
  ::ERR_clear_error();
  const std::string named = std::string(option) + " " + file;
  if (key == nullptr)
    throw UsageError(named + ": no PEM private key in it" +
                     (file == cert_file ? " (give it with --redis-tls-key FILE)" : ""));
  ::EVP_PKEY_free(key);
  if (!used)
    throw UsageError(named + ": not the key of the certificate in --redis-tls-cert " + cert_file);
}

// The DNS names and IP addresses a certificate is for (its subjectAltName, else its common name),
// joined by ", ".
std::string certificate_names(X509* certificate) {
  std::vector<std::string> names;
  auto* const alt_names = static_cast<GENERAL_NAMES*>(
      ::X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; alt_names != nullptr && i < sk_GENERAL_NAME_num(alt_names); ++i) {
    const GENERAL_NAME* const name = sk_GENERAL_NAME_value(alt_names, i);
    if (name->type == GEN_DNS) {
      names.emplace_back(reinterpret_cast<const char*>(::ASN1_STRING_get0_data(name->d.dNSName)),
                         static_cast<std::size_t>(::ASN1_STRING_length(name->d.dNSName)));
    } else if (name->type == GEN_IPADD) {
      const int length = ::ASN1_STRING_length(name->d.iPAddress);
      std::array<char, INET6_ADDRSTRLEN> text{};
      if ((length == 4 || length == 16) &&
          ::inet_ntop(length == 4 ? AF_INET : AF_INET6, ::ASN1_STRING_get0_data(name->d.iPAddress),
                      text.data(), static_cast<socklen_t>(text.size())) != nullptr)
        names.emplace_back(text.data());
    }
  }
  GENERAL_NAMES_free(alt_names);
  if (names.empty()) {
    std::array<char, 256> common_name{};
    if (::X509_NAME_get_text_by_NID(::X509_get_subject_name(certificate), NID_commonName,
                                    common_name.data(), static_cast<int>(common_name.size())) > 0)
      names.emplace_back(common_name.data());
  }
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

bool is_ip_address(const std::string& host) {
  std::array<unsigned char, sizeof(in6_addr)> address{};
  return ::inet_pton(AF_INET, host.c_str(), address.data()) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), address.data()) == 1;
}

const char* getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// A session file is a line and a PEM session of a few KiB, with the server's certificate.
constexpr std::size_t kLargestSessionFile = 64 << 10;

}  // namespace

// The sessions of a Tls's connections, one file per scope in the state directory (0600,
// replaced whole), read back by the next process. A file that cannot be used (missing, corrupt,
// expired, another user's, readable by others) is ignored: a full handshake then, and a new file.
class TlsSessionCache {
 public:
  TlsSessionCache(state::StateDirectory directory, bool verify, std::string trust,
                  std::function<void(const std::string&)> notify)
      : directory_(std::move(directory)),
        verify_(verify),
        trust_(std::move(trust)),
        notify_(std::move(notify)) {}

  TlsSessionScope scope_of(const Address& address, bool ip_address) const {
    return {.host = address.host,
            .port = address.port,
            .server_name = ip_address ? std::string() : address.host,
            .verify = verify_,
            .trust = trust_};
  }

  // The session kept for `scope`, if it may be offered now.
  SslSession load(const TlsSessionScope& scope) const {
    remove_abandoned_files();
    const std::string name = tls_session_file_name(scope);
    const std::optional<std::string> bytes = directory_.read_private(name, kLargestSessionFile);
    if (!bytes) return nullptr;
    std::string ignored_because = "too large for a session";
    SslSession session;
    if (bytes->size() <= kLargestSessionFile)
      session = decode_tls_session(*bytes, scope, std::time(nullptr), ignored_because);
    if (!session)
      tell("TLS session file '" + directory_.path() + "/" + name + "' ignored: " + ignored_because);
    return session;
  }

  // Keeps `session` for `scope`. Called back by OpenSSL, so it throws nothing: a session that
  // cannot be kept costs the next process a full handshake, nothing more.
  void save(const TlsSessionScope& scope, SSL_SESSION* session) const noexcept {
    remove_abandoned_files();
    try {
      directory_.replace_shared(tls_session_file_name(scope), encode_tls_session(session, scope));
    } catch (const std::exception& error) {
      tell(std::string("TLS session not kept: ") + error.what());
    }
  }

  // A process killed between writing a session's new file and renaming it left the file behind.
  void remove_abandoned_files() const noexcept {
    try {
      directory_.remove_abandoned_shared(kTlsSessionFilePrefix);
    } catch (const std::exception&) {
      // The directory cannot be listed: the files are left for another time.
    }
  }

  void tell(const std::string& message) const noexcept {
    try {
      notify_(message);
    } catch (const std::exception&) {
      // Only --verbose's line is lost.
    }
  }

 private:
  state::StateDirectory directory_;
  bool verify_;
  std::string trust_;
  std::function<void(const std::string&)> notify_;
};

namespace {

class TlsTransport final : public Transport {
 public:
  TlsTransport(io::FileDescriptor socket, const Tls& tls, const Address& address)
      : socket_(std::move(socket)),
        ssl_(::SSL_new(tls.context())),
        ca_file_(tls.ca_file()),
        host_(address.host),
        verify_(tls.verify()),
        sessions_(tls.sessions()) {
    if (!ssl_ || ::SSL_set_fd(ssl_.get(), socket_.get()) != 1)
      throw Failure("TLS: " + openssl_reason("cannot start"));
    SSL_set_app_data(ssl_.get(), this);
    const bool ip_address = is_ip_address(address.host);
    // SNI names a host, never an address (RFC 6066).
    if (!ip_address) ::SSL_set_tlsext_host_name(ssl_.get(), address.host.c_str());
    if (verify_) {
      X509_VERIFY_PARAM* const checks = ::SSL_get0_param(ssl_.get());
      const int set = ip_address ? ::X509_VERIFY_PARAM_set1_ip_asc(checks, address.host.c_str())
                                 : ::X509_VERIFY_PARAM_set1_host(checks, address.host.c_str(), 0);
      if (set != 1) throw Failure("TLS: cannot check the name " + address.host);
    }
    if (sessions_) {
      scope_ = sessions_->scope_of(address, ip_address);
      if (const SslSession kept = sessions_->load(scope_))
        ::SSL_set_session(ssl_.get(), kept.get());
    }
  }

  void handshake(Deadline& deadline) {
    while (true) {
      ::ERR_clear_error();
      const int result = ::SSL_connect(ssl_.get());
      if (result == 1) {
        if (::SSL_session_reused(ssl_.get()) == 1) resumed();
        return;
      }
      short wanted = 0;
      settle(result, wanted);
      pollfd ready{.fd = socket_.get(), .events = wanted, .revents = 0};
      try {
        deadline.wait({&ready, 1}, "TLS handshake");
      } catch (const Failure& failure) {
        // A plain Redis port reads a handshake as the start of a command and waits for its end.
        throw Failure(std::string(failure.what()) +
                      " (a Redis port without TLS never answers one: use redis:// there)");
      }
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
  // (Tls sets it then): it goes on without one, but remembers.
  static int on_certificate_request(SSL* ssl, X509** /*certificate*/, EVP_PKEY** /*key*/) {
    static_cast<TlsTransport*>(SSL_get_app_data(ssl))->certificate_requested_ = true;
    return 0;
  }

  // OpenSSL's callback with a session the server gave (Tls sets it when sessions are kept):
  // at the end of a TLS 1.2 handshake, or with a TLS 1.3 ticket, which comes after the handshake,
  // read with the first reply. Only a session whose certificate passed the checks is kept.
  static int on_new_session(SSL* ssl, SSL_SESSION* session) {
    const auto* const transport = static_cast<TlsTransport*>(SSL_get_app_data(ssl));
    if (transport->sessions_ && (!transport->verify_ || ::SSL_get_verify_result(ssl) == X509_V_OK))
      transport->sessions_->save(transport->scope_, session);
    return 0;  // OpenSSL keeps no reference of ours
  }

 private:
  // A session kept from before was resumed: the server proved it holds that session's secret,
  // and the certificate checked then is the one it had.
  void resumed() {
    if (verify_ && ::SSL_get_verify_result(ssl_.get()) != X509_V_OK)
      throw Failure("TLS: a session resumed without a trusted certificate");
    sessions_->tell("TLS session resumed with " + host_ + ":" + std::to_string(scope_.port));
  }

  // After a call that did not complete: what to wait for, or Failure saying why it failed.
  void settle(int result, short& wanted) {
    const int saved_errno = errno;
    const int error = ::SSL_get_error(ssl_.get(), result);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      wanted = error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      return;
    }
    // A server that requires a certificate ends the connection once the handshake is over (TLS
    // 1.3): its alert may be lost to the reset that follows, so the request explains it.
    if (certificate_requested_ && !answered_)
      throw Failure("TLS: the server requires a client certificate (--redis-tls-cert)");
    if (error == SSL_ERROR_ZERO_RETURN) throw Failure("the server closed the connection");
    if (error == SSL_ERROR_SYSCALL && ::ERR_peek_last_error() == 0)
      throw Failure(saved_errno != 0 ? std::strerror(saved_errno)
                                     : "the server closed the connection");
    const long verified = ::SSL_get_verify_result(ssl_.get());
    if (verified != X509_V_OK) {
      ::ERR_clear_error();
      throw Failure(std::string("TLS: the server's certificate is not trusted: ") +
                    ::X509_verify_cert_error_string(verified) + untrusted_hint(verified));
    }
    throw Failure("TLS: " + openssl_reason("failed"));
  }

  // What to do about a certificate that failed the check `verified`, or nothing.
  std::string untrusted_hint(long verified) const {
    switch (verified) {
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH: {
        // Verification stopped before the certificate became the peer's: the chain holds it.
        STACK_OF(X509)* const chain = ::SSL_get_peer_cert_chain(ssl_.get());
        const std::string names = chain != nullptr && sk_X509_num(chain) > 0
                                      ? certificate_names(sk_X509_value(chain, 0))
                                      : std::string();
        if (names.empty()) return {};
        return " (it is for " + names + ", not " + host_ + ": name one of those in the URL)";
      }
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        return ca_file_.empty() ? std::string(
                                      " (no CA of the system's store signed it: give its CA with "
                                      "--redis-tls-ca FILE)")
                                : " (no CA in --redis-tls-ca " + ca_file_ + " signed it)";
      default:
        return {};
    }
  }

  struct FreeSsl {
    void operator()(SSL* ssl) const { ::SSL_free(ssl); }
  };
  io::FileDescriptor socket_;
  std::unique_ptr<SSL, FreeSsl> ssl_;
  std::string ca_file_;
  std::string host_;
  bool verify_;
  std::shared_ptr<const TlsSessionCache> sessions_;  // none: sessions are not kept
  TlsSessionScope scope_;
  bool certificate_requested_ = false;
  bool answered_ = false;
};

}  // namespace

void Tls::FreeContext::operator()(ssl_ctx_st* context) const { ::SSL_CTX_free(context); }

Tls::Tls(const TlsOptions& options, std::function<void(const std::string&)> notify)
    : context_(::SSL_CTX_new(::TLS_client_method())),
      verify_(options.verify),
      ca_file_(options.ca_file) {
  if (!context_) throw std::bad_alloc();
  SSL_CTX* const context = context_.get();
  ::SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  // A write may take part of a command (as write(2) does) and be called again with the rest.
  ::SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // What a kept session was checked under (TlsSessionScope::trust).
  std::string trust = "insecure";
  if (options.verify) {
    ::SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
    if (options.ca_file.empty()) {
      if (::SSL_CTX_set_default_verify_paths(context) != 1)
        throw UsageError("the system's CA store: " + openssl_reason("cannot be loaded"));
      // The system's store is found through these when they are set.
      trust = std::string("the system's store, ") + X509_get_default_cert_file_env() + "=" +
              getenv_or_empty(X509_get_default_cert_file_env()) + " " +
              X509_get_default_cert_dir_env() + "=" +
              getenv_or_empty(X509_get_default_cert_dir_env());
    } else {
      trust = "CA file " + trust_cas(context, options.ca_file, options.directory);
    }
  }
  if (options.cert_file.empty()) {
    ::SSL_CTX_set_client_cert_cb(context, TlsTransport::on_certificate_request);
  } else {
    trust += ", client certificate " +
             use_certificate_chain(context, options.cert_file, options.directory);
    const bool own_file = !options.key_file.empty();
    use_private_key(context, own_file ? "--redis-tls-key" : "--redis-tls-cert",
                    own_file ? options.key_file : options.cert_file, options.cert_file,
                    options.directory);
  }
  if (!options.session_dir.empty()) keep_sessions(options, std::move(trust), std::move(notify));
}

void Tls::keep_sessions(const TlsOptions& options, std::string trust,
                        std::function<void(const std::string&)> notify) {
  std::optional<state::StateDirectory> directory;
  try {
    directory.emplace(state::StateDirectory::open(options.session_dir));
  } catch (const std::runtime_error& unusable) {
    // UnsafeStateError, StoreUnavailable: every connection makes a full handshake then.
    notify(std::string("TLS sessions not kept: ") + unusable.what());
    return;
  }
  sessions_ = std::make_shared<const TlsSessionCache>(std::move(*directory), options.verify,
                                                      std::move(trust), std::move(notify));
  SSL_CTX* const context = context_.get();
  // Sessions go to the callback, which keeps them in files; none is kept in memory.
  ::SSL_CTX_set_session_cache_mode(context,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  ::SSL_CTX_sess_set_new_cb(context, TlsTransport::on_new_session);
}

Tls::Tls(Tls&&) noexcept = default;
Tls& Tls::operator=(Tls&&) noexcept = default;
Tls::~Tls() = default;

std::unique_ptr<Transport> tls_transport(io::FileDescriptor socket, const Tls& tls,
                                         const Address& address, Deadline& deadline) {
  auto transport = std::make_unique<TlsTransport>(std::move(socket), tls, address);
  transport->handshake(deadline);
  return transport;
}

}  // namespace ratelimit::stores::redis
