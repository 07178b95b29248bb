#include "stores/redis/redis_tls_session.hpp"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <fstream>
#include <set>
#include <sstream>

namespace ratelimit::stores::redis {
namespace {

// tls_session.pem: a TLS 1.3 session (ticket lifetime 7200 s) that `openssl s_client
// -servername localhost -sess_out` kept from `openssl s_server` with a certificate for localhost
// and 127.0.0.1, valid for 100 years. The server did not acknowledge the name: the session holds
// none, as Redis's do.
SslSession fixture_session() {
  std::ifstream file(RATELIMIT_TLS_SESSION_PEM);
  std::stringstream pem;
  pem << file.rdbuf();
  const std::string bytes = pem.str();
  BIO* const bio = ::BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size()));
  SslSession session(::PEM_read_bio_SSL_SESSION(bio, nullptr, nullptr, nullptr));
  ::BIO_free(bio);
  if (!session) throw std::runtime_error("cannot read " RATELIMIT_TLS_SESSION_PEM);
  return session;
}

const TlsSessionScope kLocalhost{
    .host = "localhost", .port = 6380, .server_name = "localhost", .verify = true, .trust = "ca"};

class TlsSessionFile : public ::testing::Test {
 protected:
  SslSession session_ = fixture_session();
  std::string file_ = encode_tls_session(session_.get(), kLocalhost);
  std::time_t made_at_ = ::SSL_SESSION_get_time(session_.get());
  std::string ignored_because_;

  bool offered(std::string_view bytes, const TlsSessionScope& scope, std::time_t now) {
    ignored_because_.clear();
    const SslSession decoded = decode_tls_session(bytes, scope, now, ignored_because_);
    EXPECT_EQ(decoded == nullptr, !ignored_because_.empty());
    return decoded != nullptr;
  }
};

TEST_F(TlsSessionFile, ComesBackWithinItsScopeAndLifetime) {
  const std::size_t line_end = file_.find('\n');
  EXPECT_TRUE(file_.starts_with("ratelimit TLS session 1 for "));
  EXPECT_EQ(line_end, std::string("ratelimit TLS session 1 for ").size() + 64);
  EXPECT_TRUE(file_.substr(line_end + 1).starts_with("-----BEGIN SSL SESSION PARAMETERS-----"));
  EXPECT_TRUE(offered(file_, kLocalhost, made_at_ + 60));
  EXPECT_TRUE(offered(file_, kLocalhost, made_at_ + 7199));
  // The same session written again reads back the same.
  ignored_because_.clear();
  const SslSession decoded = decode_tls_session(file_, kLocalhost, made_at_, ignored_because_);
  ASSERT_NE(decoded, nullptr);
  EXPECT_EQ(encode_tls_session(decoded.get(), kLocalhost), file_);
}

TEST_F(TlsSessionFile, ExpiredIsIgnored) {
  EXPECT_FALSE(offered(file_, kLocalhost, made_at_ + 7200));
  EXPECT_EQ(ignored_because_, "the session has expired");
}

// A file kept for one scope and found at another's name (copied there) is not offered there.
TEST_F(TlsSessionFile, AnotherScopeIsIgnored) {
  TlsSessionScope other = kLocalhost;
  other.trust = "another ca";
  EXPECT_FALSE(offered(file_, other, made_at_ + 60));
  EXPECT_EQ(ignored_because_, "kept for another server, name or trust");
  other = kLocalhost;
  other.port = 6381;
  EXPECT_FALSE(offered(file_, other, made_at_ + 60));
  EXPECT_EQ(ignored_because_, "kept for another server, name or trust");
}

// A session that holds the name it was made for (when the server acknowledged it) is offered
// under that name only, whatever its file says.
TEST_F(TlsSessionFile, AnotherServerNameIsIgnored) {
  ASSERT_EQ(::SSL_SESSION_set1_hostname(session_.get(), "localhost"), 1);
  EXPECT_TRUE(offered(encode_tls_session(session_.get(), kLocalhost), kLocalhost, made_at_ + 60));
  TlsSessionScope elsewhere = kLocalhost;
  elsewhere.host = elsewhere.server_name = "elsewhere.test";
  EXPECT_FALSE(offered(encode_tls_session(session_.get(), elsewhere), elsewhere, made_at_ + 60));
  EXPECT_EQ(ignored_because_, "the session is for another server name");
  // An address sends no server name.
  TlsSessionScope address = kLocalhost;
  address.host = "127.0.0.1";
  address.server_name = "";
  EXPECT_FALSE(offered(encode_tls_session(session_.get(), address), address, made_at_ + 60));
  EXPECT_EQ(ignored_because_, "the session is for another server name");
}

TEST_F(TlsSessionFile, CertificateNotForTheHostIsIgnoredWhenVerifying) {
  TlsSessionScope other_host = kLocalhost;
  other_host.host = "elsewhere.test";
  EXPECT_FALSE(offered(encode_tls_session(session_.get(), other_host), other_host, made_at_ + 60));
  EXPECT_EQ(ignored_because_, "its server certificate is not for elsewhere.test");
  other_host.verify = false;  // --redis-tls-insecure checks no name
  EXPECT_TRUE(offered(encode_tls_session(session_.get(), other_host), other_host, made_at_ + 60));
}

TEST_F(TlsSessionFile, CorruptIsIgnored) {
  const std::string pem = file_.substr(file_.find('\n') + 1);
  const std::string line = file_.substr(0, file_.size() - pem.size());
  for (const std::string& corrupt :
       {std::string(), std::string("garbage"), pem, "ratelimit TLS session 2\n" + pem,
        file_.substr(0, file_.size() / 2), line + std::string(2000, 'A'), line}) {
    EXPECT_FALSE(offered(corrupt, kLocalhost, made_at_ + 60)) << corrupt;
  }
  EXPECT_FALSE(offered(pem, kLocalhost, made_at_));
  EXPECT_EQ(ignored_because_, "not a session of this version of ratelimit");
  EXPECT_FALSE(offered(file_.substr(0, file_.size() / 2), kLocalhost, made_at_));
  EXPECT_EQ(ignored_because_, "no TLS session in it");
  // A byte changed inside the session's DER: unreadable, or read as another session that no
  // longer fits (never a crash).
  for (std::size_t at = file_.find('\n', 30) + 1; at < file_.size() - 40; at += 7) {
    std::string changed = file_;
    changed[at] = changed[at] == 'A' ? 'B' : 'A';
    offered(changed, kLocalhost, made_at_ + 60);
  }
}

TEST(TlsSessionFileName, EveryPartOfTheScopeNamesAnotherFile) {
  const std::string name = tls_session_file_name(kLocalhost);
  EXPECT_EQ(name, tls_session_file_name(kLocalhost));
  EXPECT_EQ(name.size(), std::string("tls-session-").size() + 32);
  EXPECT_TRUE(name.starts_with("tls-session-"));
  EXPECT_EQ(name.find_first_not_of("0123456789abcdef", 12), std::string::npos);
  std::set<std::string> names{name};
  TlsSessionScope other = kLocalhost;
  other.host = "localhost.";
  names.insert(tls_session_file_name(other));
  other = kLocalhost;
  other.port = 6381;
  names.insert(tls_session_file_name(other));
  other = kLocalhost;
  other.server_name = "";
  names.insert(tls_session_file_name(other));
  other = kLocalhost;
  other.verify = false;
  names.insert(tls_session_file_name(other));
  other = kLocalhost;
  other.trust = "another ca";
  names.insert(tls_session_file_name(other));
  // The parts are kept apart: moving a character from one to the next is another scope.
  other = kLocalhost;
  other.host = "localhost6";
  other.port = 380;
  names.insert(tls_session_file_name(other));
  EXPECT_EQ(names.size(), 7U);
}

TEST(Sha256Hex, KnownDigest) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace ratelimit::stores::redis
