// Connection on each of its transports (redis_connection_socket_posix.cpp: a unix socket and
// TCP; redis_connection_tls_posix.cpp: TLS), against real redis-servers that each test starts.
#include "stores/redis/redis_connection.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis_server.hpp"
#include "stores/redis/redis_url.hpp"

namespace ratelimit::stores::redis {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

constexpr std::chrono::milliseconds kTimeout = 2s;

// Commands and their replies, each of RESP's kinds, on every transport; any byte may be in an
// argument.
TEST(RedisConnection, CommandsAndTheirRepliesOnEveryTransport) {
  RedisServer server({}, true);
  TlsOptions trusted;
  trusted.ca_file = server.ca_file();
  const Tls tls(trusted);
  const std::string any_bytes("a\r\n$3\r\n\0b", 10);
  for (const std::string& url : {server.unix_url(), server.tcp_url(), server.tls_url()}) {
    const Address address = parse_url(url);
    Deadline deadline(kTimeout);
    Connection connection(address, address.tls ? &tls : nullptr, deadline);
    const Value pong = connection.command({"PING"}, deadline);
    EXPECT_EQ(pong.type, Value::Type::status) << url;
    EXPECT_EQ(pong.text, "PONG") << url;
    const std::vector<Value> replies = connection.pipeline({{"SET", "k", any_bytes},
                                                            {"GET", "k"},
                                                            {"GET", "none"},
                                                            {"INCR", "k"},
                                                            {"RPUSH", "l", "x"},
                                                            {"LRANGE", "l", "0", "-1"}},
                                                           deadline);
    ASSERT_EQ(replies.size(), 6u) << url;
    EXPECT_EQ(replies[0].text, "OK");
    EXPECT_EQ(replies[1].type, Value::Type::string);
    EXPECT_EQ(replies[1].text, any_bytes);
    EXPECT_EQ(replies[2].type, Value::Type::nil);
    // An error reply is returned, not thrown, and the connection stays open.
    EXPECT_EQ(replies[3].type, Value::Type::error);
    EXPECT_EQ(replies[4].type, Value::Type::integer);
    EXPECT_EQ(replies[5].type, Value::Type::array);
    ASSERT_EQ(replies[5].elements.size(), 1u);
    EXPECT_EQ(replies[5].elements[0].text, "x");
    EXPECT_TRUE(connection.open()) << url;
    connection.command({"FLUSHALL"}, deadline);
  }
}

TEST(RedisConnection, AServerThatIsNotThereIsUnavailableAndNamedWithoutItsPassword) {
  testing::TempDir dir;
  const std::string url = "unix://:hunter2@" + (dir.path() / "none.sock").string();
  Deadline deadline(kTimeout);
  try {
    Connection connection(parse_url(url), nullptr, deadline);
    FAIL() << "connected to nothing";
  } catch (const StoreUnavailable& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("none.sock"), std::string::npos) << message;
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  }
}

// A TLS server whose certificate the client cannot check (its CA not trusted) is refused.
TEST(RedisConnection, ATlsServerOfAnUntrustedCaIsRefused) {
  RedisServer server({}, true);
  const Tls system_cas(TlsOptions{});
  Deadline deadline(kTimeout);
  EXPECT_THROW(Connection(parse_url(server.tls_url()), &system_cas, deadline), StoreUnavailable);
}

// A connection the server closed while it was idle is found closed before anything is sent.
TEST(RedisConnection, ClosedWhileIdleIsLostBeforeSending) {
  RedisServer server;
  Deadline deadline(kTimeout);
  Connection connection(parse_url(server.unix_url()), nullptr, deadline);
  EXPECT_EQ(connection.command({"PING"}, deadline).text, "PONG");
  server.stop();
  try {
    connection.command({"INCR", "k"}, deadline);
    FAIL() << "a command on a closed connection";
  } catch (const ConnectionLost& lost) {
    EXPECT_FALSE(lost.sent());
  }
  EXPECT_FALSE(connection.open());
}

// A call whose request's deadline passed before it was sent is refused (TooLate) without a word to
// the server, and the connection stays open for the next call: the agent, serving --try callers
// whose 50 ms passed while they queued on a loaded machine, does not connect again for each.
TEST(RedisConnection, ACallRefusedBeforeSendingKeepsTheConnection) {
  RedisServer server;
  Deadline deadline(kTimeout);
  Connection connection(parse_url(server.unix_url()), nullptr, deadline);
  Deadline refused(kTimeout);
  refused.refuse_after(std::chrono::nanoseconds::zero());
  EXPECT_THROW(connection.command({"INCR", "k"}, refused), TooLate);
  EXPECT_TRUE(connection.open());
  EXPECT_EQ(connection.command({"GET", "k"}, deadline).type, Value::Type::nil);
}

}  // namespace
}  // namespace ratelimit::stores::redis
