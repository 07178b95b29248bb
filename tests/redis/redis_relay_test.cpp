#include "stores/redis/redis_relay.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../unit/golden_vectors.hpp"
#include "../unit/temp_dir.hpp"
#include "errors.hpp"
#include "io/waiter.hpp"
#include "redis_golden_store.hpp"
#include "redis_server.hpp"
#include "settings_of.hpp"
#include "stores/redis/redis_connection.hpp"
#include "stores/redis/redis_deployment.hpp"
#include "stores/redis/redis_script.hpp"
#include "stores/redis/redis_script_protocol.hpp"
#include "stores/redis/redis_store.hpp"

// Redis commands relayed as the host agent relays them, the agent in process: its Relay
// answers what the client's RelayClient sends, against a real redis-server.
namespace ratelimit::stores::redis {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using testing::kServerTimeout;
using testing::RedisServer;

io::Waiter& real_waiter() {
  static io::SignalGuard guard;
  static io::SignalWaiter waiter(guard);
  return waiter;
}

PermitRequest request(const std::string& key, double rate) {
  PermitRequest permits;
  permits.key = key;
  permits.params.permits_per_second = rate;
  return permits;
}

// The agent in process. Outcomes queued in `scripted` come first, in order, instead of answers
// (an agent killed, a signal); then every request goes to the relay.
class InProcessAgent final : public AgentLink {
 public:
  AgentAnswer exchange(std::string_view request, nanoseconds, nanoseconds, io::Waiter&) override {
    ++requests;
    if (!scripted.empty()) {
      AgentAnswer answer = scripted.front();
      scripted.pop_front();
      // A lost agent may have acted on the request: this one did.
      if (answer.outcome == AgentAnswer::Outcome::lost)
        relay.answer({std::string(request)}, real_waiter());
      return answer;
    }
    std::string answer = relay.answer({std::string(request)}, real_waiter()).front();
    exchanged.emplace_back(request, answer);
    return {.outcome = AgentAnswer::Outcome::answered, .answer = std::move(answer)};
  }
  explicit InProcessAgent(std::string session_dir = {}) : relay(std::move(session_dir)) {}
  Relay relay;
  std::deque<AgentAnswer> scripted;
  int requests = 0;
  // Each request the relay answered, and its answer, in turn.
  std::vector<std::pair<std::string, std::string>> exchanged;
};

class RedisRelayTest : public ::testing::Test {
 protected:
  Store relayed() {
    Store store(testing::settings_of(server_.unix_url(), kServerTimeout));
    store.relay_through(RelayClient(agent_, {.url = server_.unix_url()}));
    return store;
  }
  // The script loaded on the server, so that each request below runs at its first FCALL.
  void load_script() {
    Store(testing::settings_of(server_.unix_url(), kServerTimeout))
        .reserve(request("warm", 1), real_waiter());
  }
  RedisServer server_;
  std::shared_ptr<InProcessAgent> agent_ = std::make_shared<InProcessAgent>();
};

TEST_F(RedisRelayTest, GoldenDecisionsHoldThroughTheAgent) {
  Store redis = relayed();
  const auto vectors = testing::read_golden_vectors(RATELIMIT_GOLDEN_VECTORS);
  ASSERT_GE(vectors.size(), 10u);
  for (const testing::GoldenVector& vector : vectors) {
    RedisGoldenStore store(redis, "golden-" + vector.name);
    for (const std::string& mismatch : testing::replay(vector, store)) ADD_FAILURE() << mismatch;
  }
  EXPECT_GT(agent_->requests, 100);
  EXPECT_EQ(agent_->relay.connections(), 1u);
}

TEST_F(RedisRelayTest, ScriptFlushedIsLoadedAgainThroughTheAgentAndBookedOnce) {
  Store redis = relayed();
  EXPECT_EQ(redis.reserve(request("flush", 1), real_waiter()).wait, 0ns);
  Deadline deadline(kServerTimeout);
  Connection(parse_url(server_.unix_url()), nullptr, deadline)
      .command({"SCRIPT", "FLUSH"}, deadline);
  const Reservation again = redis.reserve(request("flush", 1), real_waiter());
  EXPECT_GT(again.wait, 900ms);
  EXPECT_LE(again.wait, 1s);
  EXPECT_EQ(agent_->relay.decisions(), 2u);
}

TEST_F(RedisRelayTest, WithoutAnAgentTheClientGoesDirect) {
  agent_->scripted.push_back({.outcome = AgentAnswer::Outcome::no_agent});
  Store redis = relayed();
  EXPECT_TRUE(redis.reserve(request("direct", 1), real_waiter()).granted);
  EXPECT_GT(redis.reserve(request("direct", 1), real_waiter()).wait, 900ms);
  // Asked once: direct from then on.
  EXPECT_EQ(agent_->requests, 1);
  EXPECT_EQ(agent_->relay.decisions(), 0u);
}

// An agent killed mid-call costs one retry: the request (which it booked) is sent once more, so
// the key pays twice for it, and never grants twice.
TEST_F(RedisRelayTest, AgentLostAfterTheRequestCostsOneRetry) {
  load_script();
  agent_->scripted.push_back({.outcome = AgentAnswer::Outcome::lost});
  Store redis = relayed();
  const Reservation reservation = redis.reserve(request("lost", 1), real_waiter());
  EXPECT_TRUE(reservation.granted);
  EXPECT_GT(reservation.wait, 900ms);
  EXPECT_EQ(agent_->requests, 2);
  // Lost twice: the store is unavailable, as for a connection lost twice.
  agent_->scripted.push_back({.outcome = AgentAnswer::Outcome::lost});
  agent_->scripted.push_back({.outcome = AgentAnswer::Outcome::lost});
  EXPECT_THROW(redis.reserve(request("lost", 1), real_waiter()), StoreUnavailable);
}

TEST_F(RedisRelayTest, StopSignalAndDeadlineEndTheWaitForTheAgent) {
  Store redis = relayed();
  agent_->scripted.push_back({.outcome = AgentAnswer::Outcome::stopped, .signal = SIGINT});
  EXPECT_EQ(redis.reserve(request("stop", 1), real_waiter()).signal, SIGINT);
  PermitRequest now_or_never = request("stop", 1);
  now_or_never.deadline = real_waiter().now();
  agent_->scripted.push_back({.outcome = AgentAnswer::Outcome::too_late});
  // The deadline (and its grace) has not passed yet: no answer in time is the store's fault.
  EXPECT_THROW(redis.reserve(now_or_never, real_waiter()), StoreUnavailable);
}

TEST_F(RedisRelayTest, StoreErrorsComeBackAsTheirOwn) {
  RedisServer locked("s3cr3t");
  // The URL without the password: the server refuses the script (NOAUTH), through the agent too.
  const std::string url = "unix://" + locked.socket_path();
  Store refused(testing::settings_of(url, kServerTimeout));
  refused.relay_through(RelayClient(agent_, {.url = url}));
  try {
    refused.reserve(request("k", 1), real_waiter());
    FAIL() << "granted without a password";
  } catch (const StoreUnavailable& error) {
    EXPECT_NE(std::string(error.what()).find("password"), std::string::npos) << error.what();
  }
  // A server that is not there: unavailable, as direct.
  const std::string gone = "unix:///nonexistent/redis.sock";
  Store absent(testing::settings_of(gone, kServerTimeout));
  absent.relay_through(RelayClient(agent_, {.url = gone}));
  EXPECT_THROW(absent.reserve(request("k", 1), real_waiter()), StoreUnavailable);
  // Deployments are kept apart: one per URL.
  EXPECT_EQ(agent_->relay.connections(), 2u);
}

// Requests as the clients sent them, recorded; the client is told a signal came.
class RecordingAgent final : public AgentLink {
 public:
  AgentAnswer exchange(std::string_view request, nanoseconds, nanoseconds, io::Waiter&) override {
    requests.emplace_back(request);
    return {.outcome = AgentAnswer::Outcome::stopped, .signal = SIGINT};
  }
  std::vector<std::string> requests;
};

// Answers given in turn, whatever the request.
class ReplayingAgent final : public AgentLink {
 public:
  explicit ReplayingAgent(std::vector<std::string> answers) : answers_(std::move(answers)) {}
  AgentAnswer exchange(std::string_view, nanoseconds, nanoseconds, io::Waiter&) override {
    return {.outcome = AgentAnswer::Outcome::answered, .answer = answers_.at(next_++)};
  }

 private:
  std::vector<std::string> answers_;
  std::size_t next_ = 0;
};

// A clock the test sets; waits on it end at once.
class SetClock final : public io::Waiter {
 public:
  nanoseconds now() override { return time; }
  int wait_until(nanoseconds, std::span<pollfd>) override { return 0; }
  nanoseconds time = 1h;
};

// An agent that shows no sign of life (stopped, stuck) costs the call no decision: the call goes
// to Redis itself, from then on, and Redis decides.
TEST_F(RedisRelayTest, AnAgentThatShowsNoSignOfLifeIsLeftForRedisItself) {
  agent_->scripted.push_back({.outcome = AgentAnswer::Outcome::not_answering});
  Store redis = relayed();
  PermitRequest now_or_never = request("silent", 1);
  now_or_never.deadline = real_waiter().now();
  EXPECT_TRUE(redis.reserve(now_or_never, real_waiter()).granted);
  EXPECT_FALSE(redis.reserve(now_or_never, real_waiter()).granted);
  EXPECT_EQ(agent_->requests, 1);
  EXPECT_EQ(agent_->relay.decisions(), 0u);
}

// A request whose caller's --redis-timeout ran out while it waited for its turn (behind requests
// to a server that hangs) is not sent: its caller is told what it would have been told alone.
TEST(RedisRelayDeadlines, ARequestQueuedPastItsCallersTimeoutIsNotSent) {
  const std::string url = "unix:///nowhere/redis.sock";
  SetClock clock;
  auto recorder = std::make_shared<RecordingAgent>();
  Store client(testing::settings_of(url, kServerTimeout));
  client.relay_through(RelayClient(recorder, {.url = url}));
  client.reserve(request("queued", 1), clock);
  ASSERT_EQ(recorder->requests.size(), 1u);
  clock.time += kServerTimeout;
  Relay relay;
  const std::vector<std::string> answers = relay.answer(recorder->requests, clock);
  EXPECT_EQ(relay.connections(), 0u);
  Store reader(testing::settings_of(url, kServerTimeout));
  reader.relay_through(RelayClient(std::make_shared<ReplayingAgent>(answers), {.url = url}));
  try {
    reader.reserve(request("queued", 1), clock);
    FAIL() << "answered";
  } catch (const StoreUnavailable& unavailable) {
    EXPECT_STREQ(unavailable.what(), "Redis at unix:///nowhere/redis.sock: no reply within 1s");
  }
}

// No error of the relay is one that nothing maps to an exit code (70): a call whose timeout ran
// out before it went to the agent is the store's unavailability, as on the direct path.
TEST(RedisRelayDeadlines, ACallPastItsTimeoutIsUnavailable) {
  auto recorder = std::make_shared<RecordingAgent>();
  RelayClient client(recorder, {.url = "unix:///nowhere/redis.sock"});
  SetClock clock;
  Deadline spent(kServerTimeout, &clock);
  clock.time += kServerTimeout;
  EXPECT_THROW(client.command("k", {"PING"}, spent), StoreUnavailable);
  EXPECT_TRUE(recorder->requests.empty());
}

// A call the agent answers loads no TLS file (OpenSSL's set-up costs a process milliseconds of
// CPU): a CA file that is not there goes unnoticed until a call connects itself, which says so.
TEST(RedisRelayTls, ACallTheAgentAnswersLoadsNoTlsFile) {
  const std::string url = "rediss://localhost:1";
  TlsOptions tls;
  tls.ca_file = "/nonexistent/ca.crt";
  const auto quiet = [](const std::string&) {};
  Store relayed(testing::settings_of(url, kServerTimeout, tls), quiet);
  relayed.relay_through(RelayClient(std::make_shared<RecordingAgent>(), {.url = url, .tls = tls}));
  EXPECT_EQ(relayed.reserve(request("k", 1), real_waiter()).signal, SIGINT);
  Store direct(testing::settings_of(url, kServerTimeout, tls), quiet);
  EXPECT_THROW(direct.reserve(request("k", 1), real_waiter()), InputError);
}

// What the agent says while serving a request is said by its caller, as a direct call says it:
// here the TLS session that a direct connection kept, resumed by the agent's connection.
TEST(RedisRelayTls, WhatTheAgentSaysServingARequestIsSaidByTheCaller) {
  testing::RedisServer server({}, true);
  testing::TempDir state;
  TlsOptions tls;
  tls.ca_file = server.ca_file();
  tls.session_dir = state.string();
  std::vector<std::string> direct_notes;
  Store direct(testing::settings_of(server.tls_url(), kServerTimeout, tls),
               [&](const std::string& note) { direct_notes.push_back(note); });
  EXPECT_TRUE(direct.reserve(request("k", 1e9), real_waiter()).granted);
  EXPECT_EQ(direct_notes, std::vector<std::string>{});
  Store again(testing::settings_of(server.tls_url(), kServerTimeout, tls),
              [&](const std::string& note) { direct_notes.push_back(note); });
  EXPECT_TRUE(again.reserve(request("k", 1e9), real_waiter()).granted);
  ASSERT_EQ(direct_notes.size(), 1u);

  auto agent = std::make_shared<InProcessAgent>(state.string());
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
  Store relayed(testing::settings_of(server.tls_url(), kServerTimeout, tls),
                [](const std::string&) {});
  relayed.relay_through(RelayClient(
      agent, {.url = server.tls_url(), .tls = tls},
      [&](const std::string& note) { notes.push_back(note); },
      [&](const std::string& warning) { warnings.push_back(warning); }));
  EXPECT_TRUE(relayed.reserve(request("k", 1e9), real_waiter()).granted);
  EXPECT_EQ(notes, direct_notes);
  // On the agent's kept connection, no session was resumed for the next request.
  EXPECT_TRUE(relayed.reserve(request("k", 1e9), real_waiter()).granted);
  EXPECT_EQ(notes, direct_notes);
  EXPECT_EQ(warnings, std::vector<std::string>{});
  EXPECT_EQ(agent->relay.decisions(), 2u);
}

// Notes go to the caller's notify (--verbose), warnings to its warn, in the order said; an answer
// that says anything else makes no sense, and nothing of it is said.
TEST(RedisRelayFormat, NotesAndWarningsOfAnAnswerAreToldInOrder) {
  // An answer in RESP: the array of what was said, then the reply (PONG) in an array of one.
  const auto pong = [](const std::vector<std::string>& said) {
    std::string answer = "*2\r\n*" + std::to_string(said.size()) + "\r\n";
    for (const std::string& text : said) {
      answer += '$';
      answer += std::to_string(text.size());
      answer += "\r\n";
      answer += text;
      answer += "\r\n";
    }
    return answer + "*1\r\n+PONG\r\n";
  };
  const std::string url = "unix:///a.sock";
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
  Store store(testing::settings_of(url, kServerTimeout));
  store.relay_through(RelayClient(
      std::make_shared<ReplayingAgent>(
          std::vector<std::string>{pong({"note", "one", "warning", "two", "note", "three"}),
                                   pong({"note", "four", "shout", "five"})}),
      {.url = url}, [&](const std::string& note) { notes.push_back(note); },
      [&](const std::string& warning) { warnings.push_back(warning); }));
  store.ping("k", real_waiter());
  EXPECT_EQ(notes, (std::vector<std::string>{"one", "three"}));
  EXPECT_EQ(warnings, std::vector<std::string>{"two"});
  EXPECT_THROW(store.ping("k", real_waiter()), StoreUnavailable);
  EXPECT_EQ(notes.size(), 2u);
}

// A failure crosses as one error value, its kind first, and its client throws what the agent
// caught; a Redis error reply crosses as the reply it is.
TEST(RedisRelayFormat, EachFailureComesBackAsItsOwnError) {
  const auto answer_with = [](const std::string& outcome) {
    Deadline deadline(kServerTimeout, &real_waiter());
    RelayClient client(
        std::make_shared<ReplayingAgent>(std::vector<std::string>{"*2\r\n*0\r\n" + outcome}),
        {.url = "unix:///a.sock"});
    return client.command("k", {"PING"}, deadline);
  };
  const auto message_of = [&](const std::string& outcome) -> std::string {
    try {
      answer_with(outcome);
    } catch (const StoreUnavailable& error) {
      return error.what();
    }
    return "no StoreUnavailable";
  };
  EXPECT_EQ(message_of("-UNAVAILABLE Redis at x: down\r\n"), "Redis at x: down");
  EXPECT_THROW(answer_with("-REFUSED Redis at x: NOPERM\r\n"), Refused);
  EXPECT_THROW(answer_with("-TOO_LATE\r\n"), TooLate);
  EXPECT_THROW(answer_with("-USAGE invalid URL\r\n"), UsageError);
  EXPECT_THROW(answer_with("-INPUT no such file\r\n"), InputError);
  for (const bool sent : {false, true}) {
    try {
      answer_with(sent ? "-LOST_SENT gone\r\n" : "-LOST_UNSENT gone\r\n");
      ADD_FAILURE() << "no ConnectionLost";
    } catch (const ConnectionLost& lost) {
      EXPECT_EQ(lost.sent(), sent);
      EXPECT_STREQ(lost.what(), "gone");
    }
  }
  // An error of no kind it knows, or an answer of no form it knows, makes no sense.
  EXPECT_EQ(message_of("-NONSENSE x\r\n"),
            "Redis at unix:///a.sock: the ratelimit agent gave an answer that makes no sense");
  EXPECT_EQ(message_of("+OK\r\n"),
            "Redis at unix:///a.sock: the ratelimit agent gave an answer that makes no sense");
  const std::optional<Value> reply = answer_with("*1\r\n-NOSCRIPT No matching script\r\n");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->type, Value::Type::error);
  EXPECT_EQ(reply->text, "NOSCRIPT No matching script");
}

// 8 requests for one key at 1/s that come together go out in one write, and each gets the
// decision it would get alone, in the order they came: now, in 1 s, in 2 s...
TEST_F(RedisRelayTest, RequestsThatComeTogetherAreEachDecidedAsAlone) {
  load_script();
  auto recorder = std::make_shared<RecordingAgent>();
  Store client(testing::settings_of(server_.unix_url(), kServerTimeout));
  client.relay_through(RelayClient(recorder, {.url = server_.unix_url()}));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(client.reserve(request("together", 1), real_waiter()).signal, SIGINT);
  ASSERT_EQ(recorder->requests.size(), 8u);
  Relay relay;
  const std::vector<std::string> answers = relay.answer(recorder->requests, real_waiter());
  EXPECT_EQ(relay.decisions(), 8u);
  Store reader(testing::settings_of(server_.unix_url(), kServerTimeout));
  reader.relay_through(
      RelayClient(std::make_shared<ReplayingAgent>(answers), {.url = server_.unix_url()}));
  for (int i = 0; i < 8; ++i) {
    const Reservation reservation = reader.reserve(request("together", 1), real_waiter());
    EXPECT_TRUE(reservation.granted);
    EXPECT_LE(reservation.wait, nanoseconds(i * 1s));
    EXPECT_GT(reservation.wait, nanoseconds(i * 1s) - 200ms);
  }
}

// A command sent straight to `server`.
Value direct_command(const RedisServer& server, const std::vector<std::string>& arguments) {
  Deadline deadline(kServerTimeout);
  return Connection(parse_url(server.unix_url()), nullptr, deadline).command(arguments, deadline);
}

// The calls of the bucket script that `server` ran since its statistics were last reset.
long long script_calls(const RedisServer& server) {
  const std::string stats = direct_command(server, {"INFO", "commandstats"}).text;
  constexpr std::string_view kCalls = "cmdstat_fcall:calls=";
  const std::size_t at = stats.find(kCalls);
  return at == std::string::npos ? 0 : std::stoll(stats.substr(at + kCalls.size()));
}

// The request a client sends the agent for `arguments`, a command on `redis_key` of `server`.
std::string request_to_agent(const RedisServer& server, const std::string& redis_key,
                             const std::vector<std::string>& arguments) {
  auto recorder = std::make_shared<RecordingAgent>();
  RelayClient client(recorder, {.url = server.unix_url()});
  Deadline deadline(kServerTimeout, &real_waiter());
  EXPECT_THROW(client.command(redis_key, arguments, deadline), Interrupted);
  return recorder->requests.at(0);
}

// The request of a call of the bucket script on `key` with `script_arguments` (its ARGV).
std::string script_request(const RedisServer& server, const std::string& key,
                           const std::vector<std::string>& script_arguments) {
  std::vector<std::string> call{"FCALL", std::string(kRedisBucketFunction), "1", redis_key(key)};
  call.insert(call.end(), script_arguments.begin(), script_arguments.end());
  return request_to_agent(server, redis_key(key), call);
}

// A reserve of one permit at 1/s on `key`, at 1 s after the epoch (so that waits are exact).
std::string reserve_request(const RedisServer& server, const std::string& key) {
  return script_request(server, key,
                        encode_reserve(request(key, 1), nanoseconds::max(), 1'000'000));
}

// The reply that `answer` carries back to its client; throws what the client would.
Value reply_in(const std::string& answer) {
  RelayClient reader(std::make_shared<ReplayingAgent>(std::vector<std::string>{answer}),
                     {.url = "unix:///a.sock"});
  Deadline deadline(kServerTimeout, &real_waiter());
  return reader.command("k", {"PING"}, deadline).value();
}

// The wait of a reserve's reply (granted: "WAIT FROM UNTIL").
std::string wait_in(const std::string& answer) {
  const Value reply = reply_in(answer);
  EXPECT_EQ(reply.type, Value::Type::string) << answer;
  return reply.text.substr(0, reply.text.find(' '));
}

// The golden vectors' requests, as their clients sent them to the agent, answered together in
// one answer(): the script calls on each key go as one batch, and every answer is byte for byte
// the one the request got alone.
TEST_F(RedisRelayTest, GoldenRequestsAnsweredTogetherGetTheAnswersTheyGotAlone) {
  load_script();
  Store redis = relayed();
  const auto vectors = testing::read_golden_vectors(RATELIMIT_GOLDEN_VECTORS);
  for (const testing::GoldenVector& vector : vectors) {
    RedisGoldenStore store(redis, "golden-" + vector.name);
    for (const std::string& mismatch : testing::replay(vector, store)) ADD_FAILURE() << mismatch;
  }
  std::vector<std::string> requests;
  std::vector<std::string> alone;
  for (const auto& [request, answer] : agent_->exchanged) {
    requests.push_back(request);
    alone.push_back(answer);
  }
  const std::uint64_t decisions = agent_->relay.decisions();
  // The keys as the first request found them; the script stays loaded.
  direct_command(server_, {"FLUSHALL"});
  direct_command(server_, {"CONFIG", "RESETSTAT"});
  const std::vector<std::string> together = agent_->relay.answer(requests, real_waiter());
  ASSERT_EQ(together.size(), alone.size());
  for (std::size_t i = 0; i < alone.size(); ++i)
    EXPECT_EQ(together[i], alone[i]) << "request " << i;
  EXPECT_EQ(agent_->relay.decisions() - decisions, decisions);
  // One batch per vector's key, after the reset (DEL) that begins the vector; a request over
  // several keys (request_all) is a script call of its own, batched with none.
  long long calls_alone = 0;
  for (const testing::GoldenVector& vector : vectors)
    for (const testing::GoldenStep& step : vector.steps) calls_alone += step.request_all ? 1 : 0;
  EXPECT_LE(script_calls(server_), static_cast<long long>(vectors.size()) + calls_alone);
  EXPECT_GT(decisions, 2 * vectors.size());
}

// A request with bad arguments among others on its key gets its own error, whether the script
// refuses it or fails on it; the others are decided as alone, in order.
TEST_F(RedisRelayTest, ABadRequestInABatchSpoilsNoOther) {
  load_script();
  direct_command(server_, {"CONFIG", "RESETSTAT"});
  std::vector<std::string> bad_permits =
      encode_reserve(request("bad", 1), nanoseconds::max(), 1'000'000);
  bad_permits[kArgPermits - 1] = "0";
  std::vector<std::string> bad_time = bad_permits;
  bad_time[kArgPermits - 1] = "1";
  bad_time[kArgTime - 1] = "soon";
  const std::vector<std::string> answers = agent_->relay.answer(
      {reserve_request(server_, "bad"), script_request(server_, "bad", bad_permits),
       reserve_request(server_, "bad"), script_request(server_, "bad", bad_time),
       reserve_request(server_, "bad")},
      real_waiter());
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_EQ(wait_in(answers[0]), "0");
  const Value refused = reply_in(answers[1]);
  EXPECT_EQ(refused.type, Value::Type::error);
  EXPECT_EQ(refused.text, "ERR ratelimit: bad arguments");
  EXPECT_EQ(wait_in(answers[2]), "1000000000");
  const Value failed = reply_in(answers[3]);
  EXPECT_EQ(failed.type, Value::Type::error);
  EXPECT_TRUE(failed.text.starts_with("ERR ")) << failed.text;
  EXPECT_EQ(wait_in(answers[4]), "2000000000");
  EXPECT_EQ(agent_->relay.decisions(), 3u);
  EXPECT_EQ(script_calls(server_), 1);
}

// A request whose reply is nil (no bucket) gets nil, in its place among the others.
TEST_F(RedisRelayTest, ANilReplyInABatchStaysNil) {
  load_script();
  direct_command(server_, {"CONFIG", "RESETSTAT"});
  const std::string status = script_request(server_, "nil", encode_status(std::int64_t{1'000'000}));
  const std::vector<std::string> answers =
      agent_->relay.answer({status, reserve_request(server_, "nil"), status}, real_waiter());
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(reply_in(answers[0]).type, Value::Type::nil);
  EXPECT_EQ(wait_in(answers[1]), "0");
  EXPECT_EQ(reply_in(answers[2]).type, Value::Type::array);
  EXPECT_EQ(script_calls(server_), 1);
}

// A batch whose requests cannot all be told apart serves none of them.
TEST_F(RedisRelayTest, ABatchThatIsNotWholeServesNoRequest) {
  load_script();
  const std::vector<std::string> reserve =
      encode_reserve(request("torn", 1), nanoseconds::max(), 1'000'000);
  std::vector<std::string> call{"FCALL", std::string(kRedisBucketFunction), "1", redis_key("torn"),
                                std::string(kBatchOperation)};
  add_to_batch(call, reserve);
  // A second request of 5 arguments, cut after 2.
  call.insert(call.end(), {"5", "status", ""});
  const Value reply = direct_command(server_, call);
  EXPECT_EQ(reply.type, Value::Type::error);
  EXPECT_EQ(reply.text, "ERR ratelimit: bad batch");
  EXPECT_EQ(direct_command(server_, {"EXISTS", redis_key("torn")}).integer, 0);
}

// Whatever else reaches a key between its script calls goes in its place: a reset (DEL) between
// two reserves ends the batch before it, and the reserve after it finds no bucket.
TEST_F(RedisRelayTest, AResetBetweenReservesKeepsItsPlace) {
  load_script();
  direct_command(server_, {"CONFIG", "RESETSTAT"});
  const std::string reset = request_to_agent(server_, redis_key("del"), {"DEL", redis_key("del")});
  const std::vector<std::string> answers =
      agent_->relay.answer({reserve_request(server_, "del"), reserve_request(server_, "del"), reset,
                            reserve_request(server_, "del"), reserve_request(server_, "del")},
                           real_waiter());
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_EQ(wait_in(answers[0]), "0");
  EXPECT_EQ(wait_in(answers[1]), "1000000000");
  EXPECT_EQ(reply_in(answers[2]).integer, 1);
  EXPECT_EQ(wait_in(answers[3]), "0");
  EXPECT_EQ(wait_in(answers[4]), "1000000000");
  EXPECT_EQ(script_calls(server_), 2);
}

// A batch sent to a Cluster's node that does not serve its key (MOVED: nothing ran) is sent
// again request by request, each to the node the reply names, and each decided once.
TEST(RedisRelayCluster, AMovedBatchIsAnsweredRequestByRequest) {
  RedisServer seed({}, false, true);
  RedisServer other({}, false, true);
  direct_command(seed, {"CLUSTER", "ADDSLOTSRANGE", "0", "8191"});
  direct_command(other, {"CLUSTER", "ADDSLOTSRANGE", "8192", "16383"});
  direct_command(seed, {"CLUSTER", "MEET", "127.0.0.1", std::to_string(other.port()),
                        std::to_string(other.cluster_port())});
  const auto ok = [](const RedisServer& node) {
    return direct_command(node, {"CLUSTER", "INFO"}).text.find("cluster_state:ok") !=
           std::string::npos;
  };
  for (int tries = 0; tries < 1000 && !(ok(seed) && ok(other)); ++tries)
    std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(ok(seed) && ok(other)) << "the Cluster never became ok";
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    const std::string candidate = "moved" + std::to_string(i);
    if (direct_command(seed, {"CLUSTER", "KEYSLOT", redis_key(candidate)}).integer >= 8192)
      key = candidate;
  }
  direct_command(other, library_load());
  // The requests as a client of the seed node sends them.
  RecordingAgent recorder;
  RelayClient client(std::shared_ptr<AgentLink>(&recorder, [](AgentLink*) {}),
                     {.url = seed.tcp_url()});
  for (int i = 0; i < 3; ++i) {
    Deadline deadline(kServerTimeout, &real_waiter());
    std::vector<std::string> call{"FCALL", std::string(kRedisBucketFunction), "1", redis_key(key)};
    for (std::string& argument : encode_reserve(request(key, 1), nanoseconds::max(), 1'000'000))
      call.push_back(std::move(argument));
    EXPECT_THROW(client.command(redis_key(key), call, deadline), Interrupted);
  }
  Relay relay;
  const std::vector<std::string> answers = relay.answer(recorder.requests, real_waiter());
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(wait_in(answers[0]), "0");
  EXPECT_EQ(wait_in(answers[1]), "1000000000");
  EXPECT_EQ(wait_in(answers[2]), "2000000000");
  EXPECT_EQ(relay.decisions(), 3u);
  EXPECT_EQ(direct_command(other, {"EXISTS", redis_key(key)}).integer, 1);
}

// A batch that meets a server without the script's function (FUNCTION FLUSH, a server started
// again) gives each request "Function not found": each client loads the library, calls the
// function again alone, and is booked once.
TEST_F(RedisRelayTest, ABatchWithoutTheScriptLoadsItAndBooksEachRequestOnce) {
  auto recorder = std::make_shared<RecordingAgent>();
  Store client(testing::settings_of(server_.unix_url(), kServerTimeout));
  client.relay_through(RelayClient(recorder, {.url = server_.unix_url()}));
  for (int i = 0; i < 4; ++i) client.reserve(request("noscript", 1), real_waiter());
  ASSERT_EQ(recorder->requests.size(), 4u);
  direct_command(server_, {"FUNCTION", "FLUSH"});
  direct_command(server_, {"CONFIG", "RESETSTAT"});
  const std::vector<std::string> answers = agent_->relay.answer(recorder->requests, real_waiter());
  EXPECT_EQ(script_calls(server_), 1);
  EXPECT_EQ(agent_->relay.decisions(), 0u);
  Store relayed_client = relayed();
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(reply_in(answers[i]).text.starts_with("ERR Function not found")) << answers[i];
    // The client's next requests (FUNCTION LOAD, FCALL) go to the agent alone.
    agent_->scripted.push_back({.outcome = AgentAnswer::Outcome::answered, .answer = answers[i]});
    const Reservation reservation = relayed_client.reserve(request("noscript", 1), real_waiter());
    EXPECT_TRUE(reservation.granted);
    EXPECT_LE(reservation.wait, nanoseconds(i * 1s));
    EXPECT_GT(reservation.wait, nanoseconds(i * 1s) - 200ms);
  }
  EXPECT_EQ(agent_->relay.decisions(), 4u);
  EXPECT_GT(relayed_client.reserve(request("noscript", 1), real_waiter()).wait, 3800ms);
}

// The agent serves each deployment on its own: one route per deployment, whatever the key or
// the deadline; a request of another form has none of its own.
TEST(RedisRelayFormat, RequestsAreRoutedByDeployment) {
  auto recorder = std::make_shared<RecordingAgent>();
  for (const std::string url : {"unix:///a.sock", "unix:///a.sock", "unix:///b.sock"}) {
    Store client(testing::settings_of(url, kServerTimeout));
    client.relay_through(RelayClient(recorder, {.url = url}));
    client.reserve(request("key-of-" + std::to_string(recorder->requests.size()), 1),
                   real_waiter());
  }
  ASSERT_EQ(recorder->requests.size(), 3u);
  EXPECT_EQ(Relay::route(recorder->requests[0]), Relay::route(recorder->requests[1]));
  EXPECT_NE(Relay::route(recorder->requests[0]), Relay::route(recorder->requests[2]));
  EXPECT_FALSE(Relay::route(recorder->requests[0]).empty());
  EXPECT_EQ(Relay::route("garbage"), "");
}

TEST(RedisRelayFormat, RequestsOfAnotherFormAreUnsupportedAndTheClientGoesDirect) {
  Relay relay;
  // Another version's form, an older one's and a command of another form, each in RESP or not.
  EXPECT_EQ(relay.answer({"garbage", "", "15:redis-command-1999999999:x",
                          "*2\r\n$15\r\nredis-command-3\r\n$1\r\nx\r\n", "*1\r\n$4\r\nPING\r\n",
                          "*1\r\n:1\r\n"},
                         real_waiter()),
            std::vector<std::string>(6, "11:unsupported"));
  EXPECT_EQ(relay.connections(), 0u);
}

}  // namespace
}  // namespace ratelimit::stores::redis
