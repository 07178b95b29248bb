#include "stores/redis/redis_tls_session.hpp"

#include <fmt/core.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <new>

namespace ratelimit::stores::redis {
namespace {

// The first line of every session file, then the digest of its scope: a file in another format
// (an older one, a torn or edited one) is not read as a session, nor one kept for another scope
// (copied to this one's name).
constexpr std::string_view kFormatLine = "ratelimit TLS session 1 for ";

struct FreeBio {
  void operator()(BIO* bio) const { ::BIO_free(bio); }
};
using Bio = std::unique_ptr<BIO, FreeBio>;

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (::EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, ::EVP_sha256(), nullptr) !=
      1)
    throw std::bad_alloc();  // the only way a digest of memory fails
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

namespace {

std::string digest_of(const TlsSessionScope& scope) {
  // NUL between the parts: no part holds one, so no two scopes are written alike.
  std::string whole = scope.host;
  for (const std::string& part : {std::to_string(scope.port), scope.server_name,
                                  std::string(scope.verify ? "verify" : "insecure"), scope.trust})
    whole += '\0' + part;
  return sha256_hex(whole);
}

std::string first_line(const TlsSessionScope& scope) {
  return std::string(kFormatLine) + digest_of(scope) + "\n";
}

}  // namespace

std::string tls_session_file_name(const TlsSessionScope& scope) {
  return std::string(kTlsSessionFilePrefix) + digest_of(scope).substr(0, 32);
}

void FreeSslSession::operator()(ssl_session_st* session) const { ::SSL_SESSION_free(session); }

std::string encode_tls_session(ssl_session_st* session, const TlsSessionScope& scope) {
  const Bio bio(::BIO_new(::BIO_s_mem()));
  if (!bio || ::PEM_write_bio_SSL_SESSION(bio.get(), session) != 1) throw std::bad_alloc();
  char* pem = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &pem);
  return first_line(scope) + std::string(pem, static_cast<std::size_t>(length));
}

SslSession decode_tls_session(std::string_view bytes, const TlsSessionScope& scope, std::time_t now,
                              std::string& ignored_because) {
  const std::string expected_line = first_line(scope);
  if (!bytes.starts_with(expected_line)) {
    ignored_because = bytes.starts_with(kFormatLine) ? "kept for another server, name or trust"
                                                     : "not a session of this version of ratelimit";
    return nullptr;
  }
  const std::string_view pem = bytes.substr(expected_line.size());
  const Bio bio(::BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) throw std::bad_alloc();
  SslSession session(::PEM_read_bio_SSL_SESSION(bio.get(), nullptr, nullptr, nullptr));
  ::ERR_clear_error();
  if (!session) {
    ignored_because = "no TLS session in it";
    return nullptr;
  }
  const auto ignore = [&](std::string why) {
    ignored_because = std::move(why);
    return nullptr;
  };
  if (::SSL_SESSION_is_resumable(session.get()) != 1) return ignore("the session cannot resume");
  // A TLS 1.3 ticket's lifetime may be shorter than the session's (Redis:
  // tls-session-cache-timeout).
  long lifetime = ::SSL_SESSION_get_timeout(session.get());
  if (const unsigned long hint = ::SSL_SESSION_get_ticket_lifetime_hint(session.get()); hint > 0)
    lifetime = std::min(lifetime, static_cast<long>(hint));
  if (now >= ::SSL_SESSION_get_time(session.get()) + lifetime)
    return ignore("the session has expired");
  // The session holds the name sent only when the server acknowledged it (Redis does not).
  const char* const sent_name = ::SSL_SESSION_get0_hostname(session.get());
  if (sent_name != nullptr && scope.server_name != sent_name)
    return ignore("the session is for another server name");
  if (!scope.verify) return session;
  // The certificate was checked when the session was made, under the same CAs (the scope);
  // its name and its end are checked again, as they would be on a full handshake.
  X509* const certificate = ::SSL_SESSION_get0_peer(session.get());
  if (certificate == nullptr) return ignore("no server certificate in it");
  const int for_host =
      scope.server_name.empty()
          ? ::X509_check_ip_asc(certificate, scope.host.c_str(), 0)
          : ::X509_check_host(certificate, scope.host.c_str(), scope.host.size(), 0, nullptr);
  if (for_host != 1) return ignore("its server certificate is not for " + scope.host);
  std::time_t checked_at = now;
  if (::X509_cmp_time(X509_get0_notAfter(certificate), &checked_at) <= 0)
    return ignore("its server certificate has expired");
  return session;
}

}  // namespace ratelimit::stores::redis
