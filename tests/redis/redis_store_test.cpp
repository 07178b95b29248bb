#include "stores/redis/redis_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "../unit/golden_vectors.hpp"
#include "errors.hpp"
#include "io/waiter.hpp"
#include "redis_golden_store.hpp"
#include "redis_server.hpp"
#include "settings_of.hpp"
#include "stores/redis/redis_connection.hpp"
#include "stores/redis/redis_script.hpp"
#include "stores/redis/redis_script_protocol.hpp"
#include "stores/redis/redis_url.hpp"

// Against real redis-servers, each test its own; no mock of Redis anywhere.
namespace ratelimit::stores::redis {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using namespace testing;  // the test's own server, its timeout and the golden vectors

BucketParams bursty(double rate, double burst_seconds = 1.0) {
  BucketParams params;
  params.permits_per_second = rate;
  params.max_burst_seconds = burst_seconds;
  return params;
}

PermitRequest request(const std::string& key, BucketParams params) {
  PermitRequest permits;
  permits.key = key;
  permits.params = params;
  return permits;
}

constexpr nanoseconds kForever = nanoseconds::max();

// The real clock and signal waits, as the commands use them.
io::Waiter& real_waiter() {
  static io::SignalGuard guard;
  static io::SignalWaiter waiter(guard);
  return waiter;
}

// Another client of the same server, for what the test does behind the store's back.
Value admin(const RedisServer& server, const std::vector<std::string>& command) {
  Deadline deadline(kServerTimeout);
  return Connection(parse_url(server.unix_url()), nullptr, deadline).command(command, deadline);
}

class RedisStoreTest : public ::testing::Test {
 protected:
  Store store_at(const std::string& url) {
    return Store(testing::settings_of(url, kServerTimeout),
                 [this](const std::string& note) { notes_.push_back(note); });
  }
  RedisServer server_;
  std::vector<std::string> notes_;
};

TEST_F(RedisStoreTest, ScriptReachesEveryGoldenDecision) {
  Store redis = store_at(server_.unix_url());
  const auto vectors = testing::read_golden_vectors(RATELIMIT_GOLDEN_VECTORS);
  ASSERT_GE(vectors.size(), 10u);
  for (const testing::GoldenVector& vector : vectors) {
    RedisGoldenStore store(redis, "golden-" + vector.name);
    for (const std::string& mismatch : testing::replay(vector, store)) ADD_FAILURE() << mismatch;
  }
}

// The same over TLS: the transport beneath the protocol changes nothing in the decisions.
TEST(RedisTls, ScriptReachesEveryGoldenDecisionOverTls) {
  RedisServer server({}, true);
  TlsOptions tls;
  tls.ca_file = server.ca_file();
  Store redis(testing::settings_of(server.tls_url(), kServerTimeout, tls),
              [](const std::string&) {});
  const auto vectors = testing::read_golden_vectors(RATELIMIT_GOLDEN_VECTORS);
  ASSERT_GE(vectors.size(), 10u);
  for (const testing::GoldenVector& vector : vectors) {
    RedisGoldenStore store(redis, "golden-" + vector.name);
    for (const std::string& mismatch : testing::replay(vector, store)) ADD_FAILURE() << mismatch;
  }
  // A bucket shared with plain clients of the same server.
  Store plain(testing::settings_of(server.unix_url(), kServerTimeout));
  EXPECT_EQ(redis.reserve_at(request("shared", bursty(10)), kForever, 0).wait, 0ms);
  EXPECT_EQ(plain.reserve_at(request("shared", bursty(10)), kForever, 0).wait, 100ms);
}

// Beyond the vectors: long random sequences of every kind of request, decision for decision and
// nanosecond for nanosecond against the core, at Unix times, with users of a few timetables (and
// none) at entries whose ends differ where a double would round them together, and of a few sets
// of quotas (and none), with periods that are no whole number of microseconds per slot.
TEST_F(RedisStoreTest, ScriptMatchesTheCoreOnRandomSequences) {
  Store redis = store_at(server_.unix_url());
  std::mt19937_64 random(20261130);
  const std::int64_t origin_micros = 1764460800000000;  // 2025-11-30, Unix time
  const std::string timetables[] = {"", "08:00,10;18:00,100", "00:00,1;12:00,off", "09:00,500"};
  using std::chrono::milliseconds;
  const std::vector<QuotaParams> quota_sets[] = {
      {},
      {{.limit = 30, .period = milliseconds(700)}},
      {{.limit = 12, .period = milliseconds(300)},
       {.limit = 50, .period = nanoseconds(2'000'000'001)}},
      {{.limit = 40, .period = milliseconds(700)}, {.limit = 25, .period = milliseconds(64)}}};
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::int64_t entry_ends[] = {0,          -1,        1764460800,      1764464400,
                                     1764468000, 1LL << 53, (1LL << 53) + 1, kMax - 1,
                                     kMax,       -kMax - 1};
  int compared = 0;
  int replaced = 0;
  int moved_on = 0;
  int held_by_quota = 0;
  int refused_at_quota = 0;
  for (int sequence = 0; sequence < 40; ++sequence) {
    const std::string key = "random-" + std::to_string(sequence);
    auto random_params = [&] {
      BucketParams params;
      const double rates[] = {0.3,  1,   3,   7,
                              1000, 1e6, 1e9, std::numeric_limits<double>::infinity()};
      params.permits_per_second = rates[random() % 8];
      if (random() % 2) {
        params.shape = BucketShape::warming_up;
        params.warmup = std::chrono::milliseconds(random() % 5000);
        params.cold_factor = 1.0 + static_cast<double>(random() % 40) / 10.0;
      } else {
        params.max_burst_seconds = static_cast<double>(random() % 30) / 10.0;
        params.start_full = random() % 3 == 0;
      }
      params.pay_first = random() % 3 == 0;
      return params;
    };
    auto random_schedule = [&] {
      return KeySchedule{.timetable = timetables[random() % 4],
                         .entry_until = entry_ends[random() % 10]};
    };
    BucketParams params = random_params();
    KeySchedule schedule = random_schedule();
    std::vector<QuotaParams> quotas = quota_sets[random() % 4];
    std::int64_t now_micros = origin_micros + static_cast<std::int64_t>(random() % 1000000);
    std::optional<TokenBucket> core;
    KeySchedule core_schedule;
    std::vector<Quota> core_quotas;
    for (int step = 0; step < 60; ++step) {
      now_micros += static_cast<std::int64_t>(random() % 400000);
      if (random() % 10 == 0) params = random_params();
      // Mostly the same timetable, as its users share it, at this entry or another.
      if (random() % 6 == 0) schedule.timetable = timetables[random() % 4];
      if (random() % 3 == 0) schedule.entry_until = entry_ends[random() % 10];
      if (random() % 8 == 0) params.permits_per_second = random_params().permits_per_second;
      if (random() % 10 == 0) quotas = quota_sets[random() % 4];
      PermitRequest permits = request(key, params);
      permits.schedule = schedule;
      permits.quotas = quotas;
      permits.permits = 1 + static_cast<std::int64_t>(random() % 20);
      permits.apply_params = random() % 4 != 0;
      permits.refuse_quota_wait = random() % 4 == 0;  // a pipe's --stop-at-quota
      nanoseconds timeout = kForever;
      if (random() % 3 == 0) timeout = std::chrono::milliseconds(random() % 500);
      const nanoseconds now = std::chrono::microseconds(now_micros);
      if (timeout != kForever) permits.deadline = now + timeout;
      if (!core) {
        core.emplace(params, now);
        core_schedule = schedule;
        for (const QuotaParams& quota : quotas) core_quotas.emplace_back(quota, now);
      }
      const std::int64_t entry_before = core_schedule.entry_until;
      const Reservation expected = decide(*core, core_schedule, core_quotas, permits, now);
      const Reservation actual = redis.reserve_at(permits, timeout, now_micros);
      const std::string where =
          "sequence " + std::to_string(sequence) + " step " + std::to_string(step);
      ASSERT_EQ(actual.replaced_params, expected.replaced_params) << where;
      ASSERT_EQ(actual.replaced_timetable, expected.replaced_timetable) << where;
      ASSERT_EQ(actual.replaced_quotas, expected.replaced_quotas) << where;
      ASSERT_EQ(actual.key_timetable, expected.key_timetable) << where;
      ASSERT_EQ(actual.granted, expected.granted) << where;
      ASSERT_EQ(actual.wait.count(), expected.wait.count()) << where;
      ASSERT_EQ(actual.held_by_quota, expected.held_by_quota) << where;
      const auto kept = redis.status_at(key, now_micros);
      ASSERT_TRUE(kept) << where;
      ASSERT_EQ(kept->schedule, core_schedule) << where;
      ASSERT_EQ(kept->params, core->params()) << where;
      const BucketStatus described = describe(key, *core, core_schedule, core_quotas, now);
      ASSERT_EQ(kept->quotas.size(), described.quotas.size()) << where;
      for (std::size_t i = 0; i < described.quotas.size(); ++i) {
        ASSERT_EQ(kept->quotas[i].params, described.quotas[i].params) << where;
        ASSERT_EQ(kept->quotas[i].used, described.quotas[i].used) << where;
        ASSERT_EQ(kept->quotas[i].next_free_in, described.quotas[i].next_free_in) << where;
      }
      held_by_quota += !core_quotas.empty() && expected.granted &&
                       QuotaBucket(*core, core_quotas).held_by_quota(1, now);
      // Refused only as a quota holds it back (refuse_quota_wait).
      refused_at_quota += permits.refuse_quota_wait && !expected.granted &&
                          expected.held_by_quota && expected.wait <= timeout;
      replaced += expected.replaced_params.has_value();
      moved_on += core_schedule.entry_until != entry_before && !expected.replaced_params;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 40 * 60);
  // The sequences reach both rules often, not by luck.
  EXPECT_GT(replaced, 200);
  EXPECT_GT(moved_on, 50);
  EXPECT_GT(held_by_quota, 100);
  EXPECT_GT(refused_at_quota, 50);
}

TEST_F(RedisStoreTest, UnixAndTcpClientsShareOneBucket) {
  Store over_unix = store_at(server_.unix_url());
  Store over_tcp = store_at(server_.tcp_url());
  EXPECT_EQ(over_unix.reserve_at(request("api", bursty(10)), kForever, 0).wait, 0ms);
  EXPECT_EQ(over_tcp.reserve_at(request("api", bursty(10)), kForever, 0).wait, 100ms);
  EXPECT_EQ(over_unix.reserve_at(request("api", bursty(10)), kForever, 50000).wait, 150ms);
}

TEST_F(RedisStoreTest, ServerClockDecides) {
  Store redis = store_at(server_.unix_url());
  EXPECT_EQ(redis.reserve(request("clock", bursty(2)), real_waiter()).wait, 0ms);
  const nanoseconds second = redis.reserve(request("clock", bursty(2)), real_waiter()).wait;
  EXPECT_GT(second, 400ms);
  EXPECT_LE(second, 500ms);
}

TEST_F(RedisStoreTest, ScriptIsLoadedAgainAfterFunctionFlush) {
  Store redis = store_at(server_.unix_url());
  EXPECT_EQ(redis.reserve_at(request("flushed", bursty(10)), kForever, 0).wait, 0ms);
  EXPECT_EQ(admin(server_, {"FUNCTION", "FLUSH"}).type, Value::Type::status);
  // Booked once, not twice: "Function not found" means the script did not run.
  EXPECT_EQ(redis.reserve_at(request("flushed", bursty(10)), kForever, 0).wait, 100ms);
  EXPECT_EQ(redis.reserve_at(request("flushed", bursty(10)), kForever, 0).wait, 200ms);
}

// The HSET of a bucket at 10/s as the script wrote it before timetables, and `more` fields.
std::vector<std::string> bucket_hash(const std::string& key, std::vector<std::string> more = {}) {
  std::vector<std::string> command{"HSET",   key, "v",       "1", "shape", "bursty", "rate",   "10",
                                   "burst",  "1", "warmup",  "0", "cold",  "3",      "stored", "0",
                                   "free_s", "0", "free_ns", "0"};
  command.insert(command.end(), more.begin(), more.end());
  return command;
}

TEST_F(RedisStoreTest, KeyOfAnotherTypeOrDamagedIsAFreshBucket) {
  Store redis = store_at(server_.unix_url());
  admin(server_, {"SET", "ratelimit:{text}", "garbage"});
  admin(server_, {"RPUSH", "ratelimit:{list}", "a"});
  admin(server_, {"HSET", "ratelimit:{damaged}", "v", "1", "rate", "fast"});
  admin(server_, {"HSET", "ratelimit:{future}", "v", "99"});
  // An entry's end beyond int64.
  admin(server_, bucket_hash("ratelimit:{until}",
                             {"timetable", "09:00,10", "entry_until", "9223372036854775808"}));
  for (const std::string key : {"text", "list", "damaged", "future", "until"}) {
    const Reservation first = redis.reserve_at(request(key, bursty(10)), kForever, 0);
    EXPECT_TRUE(first.granted);
    EXPECT_EQ(first.wait, 0ms) << key;
    EXPECT_EQ(redis.reserve_at(request(key, bursty(10)), kForever, 0).wait, 100ms) << key;
  }
  EXPECT_EQ(notes_, (std::vector<std::string>{
                        "key 'text': a string, not a bucket in Redis; starting a fresh bucket",
                        "key 'list': a list, not a bucket in Redis; starting a fresh bucket",
                        "key 'damaged': a damaged bucket in Redis; starting a fresh bucket",
                        "key 'future': not a bucket of this version in Redis; starting a fresh "
                        "bucket",
                        "key 'until': a damaged bucket in Redis; starting a fresh bucket"}));
  admin(server_, {"SET", "ratelimit:{text}", "garbage"});
  const auto unusable = redis.status("text");
  ASSERT_EQ(unusable.size(), 1u);
  EXPECT_EQ(unusable[0].problem, "a string, not a bucket");
}

// NaN or infinite numbers, or numbers a bucket cannot hold: damaged, so a fresh bucket that
// expires, not a key that refuses every call or never expires.
TEST_F(RedisStoreTest, KeyWithNumbersOutOfRangeIsAFreshBucket) {
  Store redis = store_at(server_.unix_url());
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"free_ns", "nan"}, {"free_s", "inf"},   {"free_s", "-1"},   {"free_ns", "1e9"},
      {"free_ns", "0.5"}, {"free_s", "1e300"}, {"stored", "nan"},  {"stored", "inf"},
      {"stored", "-1"},   {"stored", "11"},    {"rate", "nan"},    {"burst", "inf"},
      {"warmup", "inf"},  {"cold", "nan"},     {"expires", "nan"}, {"expires", "-5"}};
  for (const auto& [field, value] : damages) {
    SCOPED_TRACE(field + " " + value);
    notes_.clear();
    admin(server_, bucket_hash("ratelimit:{hurt}", {field, value}));
    const Reservation first = redis.reserve_at(request("hurt", bursty(10)), kForever, 0);
    EXPECT_TRUE(first.granted);
    EXPECT_EQ(first.wait, 0ms);
    EXPECT_EQ(redis.reserve_at(request("hurt", bursty(10)), kForever, 0).wait, 100ms);
    EXPECT_EQ(notes_, (std::vector<std::string>{
                          "key 'hurt': a damaged bucket in Redis; starting a fresh bucket"}));
    EXPECT_GT(admin(server_, {"PTTL", "ratelimit:{hurt}"}).integer, 0);
    admin(server_, {"DEL", "ratelimit:{hurt}"});
  }
}

// A key this script wrote (with `texts`, read by the common call), changed by hand: damaged too.
TEST_F(RedisStoreTest, KeyOfThisScriptChangedByHandIsAFreshBucket) {
  Store redis = store_at(server_.unix_url());
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"stored", "garbage"}, {"free_s", "garbage"}, {"free_ns", "garbage"}, {"expires", "garbage"},
      {"stored", "nan"},     {"free_ns", "0.5"},    {"rate", "garbage"}};
  for (const auto& [field, value] : damages) {
    SCOPED_TRACE(field + " " + value);
    notes_.clear();
    EXPECT_EQ(redis.reserve_at(request("edited", bursty(10)), kForever, 0).wait, 0ms);
    admin(server_, {"HSET", "ratelimit:{edited}", field, value});
    const Reservation first = redis.reserve_at(request("edited", bursty(10)), kForever, 0);
    EXPECT_TRUE(first.granted);
    EXPECT_EQ(first.wait, 0ms);
    EXPECT_EQ(notes_, (std::vector<std::string>{
                          "key 'edited': a damaged bucket in Redis; starting a fresh bucket"}));
    admin(server_, {"DEL", "ratelimit:{edited}"});
  }
}

TEST_F(RedisStoreTest, IdleKeyExpiresOnceFullAgain) {
  Store redis = store_at(server_.unix_url());
  redis.reserve(request("idle", bursty(10, 1.0)), real_waiter());
  // Next free in 100 ms, then 10 permits at 100 ms each: full in 1.1 s, plus twice the 1 s
  // margin (moved again only once less than one margin is left).
  const Value ttl = admin(server_, {"PTTL", "ratelimit:{idle}"});
  ASSERT_EQ(ttl.type, Value::Type::integer);
  EXPECT_GT(ttl.integer, 2900);
  EXPECT_LE(ttl.integer, 3100);
  // A busy key's expiry moves once per margin, not on every call, and never falls short.
  for (int i = 0; i < 5; ++i) redis.reserve(request("idle", bursty(10, 1.0)), real_waiter());
  const Value busy_ttl = admin(server_, {"PTTL", "ratelimit:{idle}"});
  EXPECT_LE(busy_ttl.integer, ttl.integer);  // moved, it would be 3.6 s
  // Next free in 600 ms, then 1 s to fill, and the margin.
  EXPECT_GT(busy_ttl.integer, 2600 - 300);
  // At a rate this small the next permit is due when nanoseconds since 1970 overflow (2262).
  redis.reserve(request("far", bursty(1e-12)), real_waiter());
  EXPECT_GT(admin(server_, {"PTTL", "ratelimit:{far}"}).integer, 200LL * 365 * 24 * 3600 * 1000);
  // At a denormal rate, never: kept without expiry.
  redis.reserve(request("never", bursty(4.9e-324)), real_waiter());
  EXPECT_EQ(admin(server_, {"PTTL", "ratelimit:{never}"}).integer, -1);
}

TEST_F(RedisStoreTest, StatusResetAndSetRate) {
  Store redis = store_at(server_.unix_url());
  redis.reserve_at(request("a", bursty(10)), kForever, 0);
  redis.reserve_at(request("b", bursty(4, 2.0)), kForever, 0);
  auto buckets = redis.status(std::nullopt);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].key, "a");
  EXPECT_EQ(buckets[1].key, "b");
  EXPECT_EQ(buckets[1].params, bursty(4, 2.0));
  const auto at_one_second = redis.status_at("a", 1000000);
  ASSERT_TRUE(at_one_second);
  EXPECT_DOUBLE_EQ(at_one_second->stored_permits, 9.0);  // refilling from 100 ms on
  EXPECT_EQ(at_one_second->next_free_in, 0ms);
  const auto at_zero = redis.status_at("a", 50000);
  EXPECT_EQ(at_zero->next_free_in, 50ms);
  EXPECT_TRUE(redis.set_rate({.key = "a", .permits_per_second = 20, .schedule = {}}));
  EXPECT_EQ(redis.status("a").at(0).params.permits_per_second, 20);
  EXPECT_FALSE(redis.set_rate({.key = "none", .permits_per_second = 20, .schedule = {}}));
  EXPECT_TRUE(redis.reset("a"));
  EXPECT_FALSE(redis.reset("a"));
  EXPECT_TRUE(redis.status("a").empty());
}

TEST_F(RedisStoreTest, AThrottleHoldsTheKeyAndStatusShowsItsBackoff) {
  Store redis = store_at(server_.unix_url());
  EXPECT_FALSE(redis.reserve_at(request("a", bursty(10)), kForever, 0).backing_off);
  EXPECT_FALSE(redis.throttle_at({.key = "none", .retry_after = 2s}, 1000000));
  const auto result = redis.throttle_at({.key = "a", .retry_after = 2s}, 1000000);
  ASSERT_TRUE(result);
  EXPECT_TRUE(result->outcome.new_event);
  EXPECT_TRUE(result->outcome.pause_extended);
  EXPECT_EQ(result->paused_for, 2s);
  EXPECT_DOUBLE_EQ(result->rate_in_force, 5);
  const auto status = redis.status_at("a", 1500000);
  ASSERT_TRUE(status);
  EXPECT_DOUBLE_EQ(status->rate_in_force, 5);
  EXPECT_EQ(status->paused_for, 1500ms);
  EXPECT_EQ(status->next_free_in, 1500ms);
  EXPECT_EQ(status->throttles, 1);
  EXPECT_EQ(status->last_throttle_ago, 500ms);
  const Reservation refused = redis.reserve_at(request("a", bursty(10)), 0ns, 1500000);
  EXPECT_FALSE(refused.granted);
  EXPECT_TRUE(refused.backing_off);
  EXPECT_EQ(refused.paused_for, 1500ms);
  EXPECT_EQ(refused.wait, 1500ms);
  // On the server's clock: the pause left, as a caller whose turn came asks it.
  redis.reserve(request("b", bursty(10)), real_waiter());
  EXPECT_EQ(redis.pause_left("b"), 0ns);
  ASSERT_TRUE(redis.throttle({.key = "b", .retry_after = 10s}));
  EXPECT_GT(redis.pause_left("b"), 9s);
  EXPECT_LE(redis.pause_left("b"), 10s);
  // A damaged bucket starts afresh, never throttled, whatever back-off it held.
  admin(server_, {"HSET", "ratelimit:{c}", "v", "1", "rate", "fast", "backoff",
                  "9000000000000000000 0 10 1 0"});
  EXPECT_EQ(redis.reserve_at(request("c", bursty(10)), kForever, 0).wait, 0ns);
  EXPECT_EQ(redis.status_at("c", 0).value().throttles, 0);
  // A back-off that cannot be read counts as none, as a key never throttled.
  admin(server_, {"HSET", "ratelimit:{b}", "backoff", "garbage"});
  EXPECT_EQ(redis.pause_left("b"), 0ns);
  EXPECT_EQ(redis.status("b").at(0).throttles, 0);
}

TEST_F(RedisStoreTest, AThrottledKeyDoesNotExpireBeforeItHasRecovered) {
  Store redis = store_at(server_.unix_url());
  const auto pttl = [&](const char* key) {
    const Value ttl = admin(server_, {"PTTL", key});
    EXPECT_EQ(ttl.type, Value::Type::integer);
    return ttl.integer;
  };
  // At 10/s, paused 2 s from 1 s: back at 10/s kBackoffRecovery (5 s) after the pause, 7 s after
  // the report, plus twice the 1 s margin (its bucket is full long before).
  redis.reserve_at(request("cut", bursty(10, 1.0)), kForever, 0);
  ASSERT_TRUE(redis.throttle_at({.key = "cut", .retry_after = 2s}, 1000000));
  EXPECT_GT(pttl("ratelimit:{cut}"), 8800);
  EXPECT_LE(pttl("ratelimit:{cut}"), 9000);
  // Cut again 1 s into its recovery, at 10 * (1 - 0.5 * 0.8^3) = 7.44/s: before it was back at its
  // plateau, so W = 0.75 * 7.44 = 5.58/s (kBackoffConvergence); the curve passes W at 5 s and
  // reaches 10/s at 5 * (1 + cbrt((10 / 5.58 - 1) / 0.5)) = 10.83 s.
  redis.reserve_at(request("twice", bursty(10, 1.0)), kForever, 0);
  ASSERT_TRUE(redis.throttle_at({.key = "twice"}, 1000000));
  ASSERT_TRUE(redis.throttle_at({.key = "twice"}, 2000000));
  EXPECT_GT(pttl("ratelimit:{twice}"), 12600);
  EXPECT_LE(pttl("ratelimit:{twice}"), 12829);
  // A key never throttled expires as before (IdleKeyExpiresOnceFullAgain).
  redis.reserve_at(request("calm", bursty(10, 1.0)), kForever, 0);
  EXPECT_LE(pttl("ratelimit:{calm}"), 3100);
}

TEST_F(RedisStoreTest, StatusShowsTheScheduleAndSetRateReplacesIt) {
  Store redis = store_at(server_.unix_url());
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  PermitRequest first = request("tt", bursty(10));
  first.schedule = {.timetable = "08:00,10;18:00,100", .entry_until = 1764486000};
  EXPECT_EQ(redis.reserve_at(first, kForever, 0).key_timetable, "08:00,10;18:00,100");
  EXPECT_EQ(redis.status_at("tt", 0)->schedule, first.schedule);

  const std::string timetable = "09:00,100;18:00,1";
  EXPECT_TRUE(redis.set_rate_at({.key = "tt",
                                 .permits_per_second = 100,
                                 .schedule = {.timetable = timetable, .entry_until = kMax - 1}},
                                0));
  auto kept = redis.status_at("tt", 0);
  EXPECT_EQ(kept->params, bursty(100));
  EXPECT_EQ(kept->schedule, (KeySchedule{.timetable = timetable, .entry_until = kMax - 1}));
  // Entries one second apart, where doubles would see the same number: the later one moves the
  // key on, the earlier one then changes nothing.
  PermitRequest later = request("tt", bursty(1));
  later.apply_params = false;
  later.schedule = {.timetable = timetable, .entry_until = kMax};
  EXPECT_EQ(redis.reserve_at(later, kForever, 0).key_timetable, timetable);
  kept = redis.status_at("tt", 0);
  EXPECT_EQ(kept->params, bursty(1));
  EXPECT_EQ(kept->schedule, later.schedule);
  PermitRequest earlier = request("tt", bursty(100));
  earlier.apply_params = false;
  earlier.schedule = {.timetable = timetable, .entry_until = kMax - 1};
  redis.reserve_at(earlier, kForever, 0);
  kept = redis.status_at("tt", 0);
  EXPECT_EQ(kept->params, bursty(1));
  EXPECT_EQ(kept->schedule, later.schedule);

  const KeySchedule none{.timetable = "", .entry_until = std::numeric_limits<std::int64_t>::min()};
  EXPECT_TRUE(redis.set_rate({.key = "tt", .permits_per_second = 5, .schedule = none}));
  kept = redis.status("tt").at(0);
  EXPECT_EQ(kept->params, bursty(5));
  EXPECT_EQ(kept->schedule, none);

  // Another timetable that keeps the key's parameters learns the key's; one that applies its
  // parameters replaces both, and says what it replaced.
  PermitRequest other = request("tt", bursty(7));
  other.apply_params = false;
  other.schedule = {.timetable = "09:00,7", .entry_until = 1};
  const Reservation kept_params = redis.reserve_at(other, kForever, 0);
  EXPECT_FALSE(kept_params.replaced_params);
  EXPECT_EQ(kept_params.key_timetable, "");
  other.apply_params = true;
  const Reservation applied = redis.reserve_at(other, kForever, 0);
  EXPECT_EQ(applied.replaced_params, bursty(5));
  EXPECT_EQ(applied.replaced_timetable, "");
  EXPECT_EQ(applied.key_timetable, "09:00,7");
  EXPECT_EQ(redis.status_at("tt", 0)->schedule, other.schedule);
}

// As the state file keeps it (state_file_store_test.cpp): with the parameters a request applies
// to a new key or in place of the key's; the argument comes after the shape's, so both shapes.
TEST_F(RedisStoreTest, TheKeyKeepsTheNotationOfTheParametersApplied) {
  Store redis = store_at(server_.unix_url());
  const auto notation_now = [&] { return redis.status_at("n", 0)->notation; };
  PermitRequest made = request("n", bursty(10));
  made.notation = "bytes si 1 time";
  redis.reserve_at(made, kForever, 0);
  EXPECT_EQ(notation_now(), "bytes si 1 time");
  PermitRequest same = made;
  same.notation = "permits si 0 time";
  redis.reserve_at(same, kForever, 0);
  EXPECT_EQ(notation_now(), "bytes si 1 time");
  PermitRequest kept = request("n", bursty(20));
  kept.apply_params = false;
  kept.notation = "lines si 0 time";
  redis.reserve_at(kept, kForever, 0);
  EXPECT_EQ(notation_now(), "bytes si 1 time");
  PermitRequest warming = request("n", bursty(20));
  warming.params.shape = BucketShape::warming_up;
  warming.params.warmup = 2s;
  warming.notation = "lines si 60 units";
  redis.reserve_at(warming, kForever, 0);
  EXPECT_EQ(notation_now(), "lines si 60 units");
  redis.reserve_at(request("n", bursty(30)), kForever, 0);
  EXPECT_EQ(notation_now(), "");
  redis.reserve_at(warming, kForever, 0);
  EXPECT_TRUE(redis.set_rate_at({.key = "n", .permits_per_second = 40, .schedule = {}}, 0));
  redis.give_back_at({.key = "n", .permits = 1, .booked = std::nullopt}, 0);
  EXPECT_EQ(notation_now(), "lines si 60 units");
  EXPECT_EQ(redis.status_at("none", 0), std::nullopt);
}

TEST_F(RedisStoreTest, KeyWrittenBeforeTimetablesHasNone) {
  Store redis = store_at(server_.unix_url());
  admin(server_, bucket_hash("ratelimit:{old}"));
  const auto kept = redis.status_at("old", 0);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->problem, "");
  EXPECT_EQ(kept->schedule, KeySchedule{});
  const Reservation same = redis.reserve_at(request("old", bursty(10)), kForever, 0);
  EXPECT_FALSE(same.replaced_params);
  EXPECT_EQ(same.wait, 0ms);
  EXPECT_TRUE(notes_.empty());
}

// A key as each older layout wrote it (the current one less what came after it) is read as the
// bucket it holds: no problem, its parameters and no schedule or quotas, and a call on it books as
// on the current layout's. Each step of the script's upgrade_layout() is needed by one of them.
TEST_F(RedisStoreTest, AKeyOfEachOlderLayoutIsReadAsTheBucketItHolds) {
  Store redis = store_at(server_.unix_url());
  // Oldest first: each layout lacks what the ones after it added.
  const std::vector<std::pair<std::string, std::vector<std::string>>> layouts = {
      {"before start_full and pay_first",
       {"start_full", "pay_first", "timetable", "entry_until", "expires", "texts", "notation"}},
      {"before timetables", {"timetable", "entry_until", "expires", "texts", "notation"}},
      {"before texts", {"texts", "notation"}},
      {"before notations", {"notation"}}};
  for (const auto& [layout, added_later] : layouts) {
    SCOPED_TRACE(layout);
    notes_.clear();
    admin(server_, {"DEL", "ratelimit:{layout}"});
    ASSERT_EQ(redis.reserve_at(request("layout", bursty(10)), kForever, 0).wait, 0ms);
    std::vector<std::string> drop{"HDEL", "ratelimit:{layout}"};
    drop.insert(drop.end(), added_later.begin(), added_later.end());
    admin(server_, drop);
    // Nothing of a later layout is left: the key holds what that layout wrote.
    const Value left = admin(server_, {"HGETALL", "ratelimit:{layout}"});
    for (const std::string& field : added_later)
      EXPECT_EQ(std::find_if(left.elements.begin(), left.elements.end(),
                             [&](const Value& v) { return v.text == field; }),
                left.elements.end())
          << field;
    const auto kept = redis.status_at("layout", 0);
    ASSERT_TRUE(kept);
    EXPECT_EQ(kept->problem, "");
    EXPECT_EQ(kept->params, bursty(10));
    EXPECT_EQ(kept->schedule, KeySchedule{});
    EXPECT_TRUE(kept->quotas.empty());
    const Reservation next = redis.reserve_at(request("layout", bursty(10)), kForever, 0);
    EXPECT_FALSE(next.replaced_params);
    EXPECT_EQ(next.wait, 100ms);
    EXPECT_EQ(redis.reserve_at(request("layout", bursty(10)), kForever, 0).wait, 200ms);
    EXPECT_TRUE(notes_.empty());
  }
}

// The common call compares the key's parameters in one field, `texts`, which an older script
// leaves as it was when its set_rate writes `rate` alone.
TEST_F(RedisStoreTest, RateAnOlderScriptWroteIsTheKeys) {
  Store redis = store_at(server_.unix_url());
  PermitRequest keeping = request("upgrade", bursty(10));
  keeping.apply_params = false;
  EXPECT_EQ(redis.reserve_at(keeping, kForever, 0).wait, 0ms);
  admin(server_, {"HSET", "ratelimit:{upgrade}", "rate", "20"});
  const Reservation at_the_keys_rate = redis.reserve_at(keeping, kForever, 0);
  EXPECT_EQ(at_the_keys_rate.key_permits_per_second, 20);
  EXPECT_EQ(at_the_keys_rate.wait, 100ms);
  // Booked at 20/s: the next waits 50 ms longer, not 100.
  EXPECT_EQ(redis.reserve_at(keeping, kForever, 0).wait, 150ms);
}

TEST_F(RedisStoreTest, KeyWrittenBeforeQuotasTakesTheCallersQuotas) {
  Store redis = store_at(server_.unix_url());
  admin(server_, bucket_hash("ratelimit:{old}"));
  PermitRequest with_quota = request("old", bursty(10));
  with_quota.quotas = {{.limit = 2, .period = std::chrono::hours(1)}};
  const Reservation first = redis.reserve_at(with_quota, kForever, 0);
  EXPECT_EQ(first.replaced_params, bursty(10));
  EXPECT_TRUE(first.replaced_quotas.empty());
  EXPECT_EQ(first.wait, 0ms);
  EXPECT_EQ(redis.reserve_at(with_quota, kForever, 0).wait, 100ms);
  EXPECT_FALSE(redis.reserve_at(with_quota, 1h, 0).granted);
  const auto kept = redis.status_at("old", 0);
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->quotas.size(), 1u);
  EXPECT_EQ(kept->quotas[0].params, with_quota.quotas[0]);
  EXPECT_EQ(kept->quotas[0].used, 2);
  // Slots of 56.25 s: the first grant's leaves the window 66 slots after it began.
  EXPECT_EQ(kept->quotas[0].next_free_in, 66 * 56250ms);
  EXPECT_TRUE(notes_.empty());
  // A caller without quotas removes them, and says which.
  const Reservation without = redis.reserve_at(request("old", bursty(10)), kForever, 0);
  EXPECT_EQ(without.replaced_quotas, with_quota.quotas);
  EXPECT_TRUE(redis.status_at("old", 0)->quotas.empty());
  EXPECT_EQ(admin(server_, {"HGET", "ratelimit:{old}", "quotas"}).text, "");
}

// Quota counts changed by hand: a damaged bucket, started afresh with the caller's quotas, not a
// script error on every call.
TEST_F(RedisStoreTest, KeyWithDamagedQuotasIsAFreshBucket) {
  Store redis = store_at(server_.unix_url());
  PermitRequest with_quota = request("quota", bursty(10));
  with_quota.quotas = {{.limit = 5, .period = std::chrono::seconds(64)}};
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"quota_counts", "garbage"},
      {"quota_counts", "[]"},
      {"quota_counts", "[[1,2,3]]"},
      {"quota_counts",
       "[[[1],0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
       "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]]"},
      {"quota_counts", "[[-1,0]]"},
      {"quota_counts", "[[1,2,]]"}};
  for (const auto& [field, value] : damages) {
    SCOPED_TRACE(field + " " + value);
    notes_.clear();
    EXPECT_EQ(redis.reserve_at(with_quota, kForever, 0).wait, 0ms);
    admin(server_, {"HSET", "ratelimit:{quota}", field, value});
    const Reservation first = redis.reserve_at(with_quota, kForever, 0);
    EXPECT_TRUE(first.granted);
    EXPECT_EQ(first.wait, 0ms);
    EXPECT_EQ(notes_, (std::vector<std::string>{
                          "key 'quota': a damaged bucket in Redis; starting a fresh bucket"}));
    EXPECT_EQ(redis.status_at("quota", 0)->quotas.at(0).used, 1);
    admin(server_, {"DEL", "ratelimit:{quota}"});
  }
}

// The common call reads a quota's sum of counts from quota_sums, written with the counts; counts
// written without them (a ratelimit with quotas from before quota_sums) are read in full.
TEST_F(RedisStoreTest, QuotaSumsCountOnlyWhileTheyAreTheKeysCounts) {
  Store redis = store_at(server_.unix_url());
  PermitRequest with_quota = request("sums", bursty(1e9));
  with_quota.quotas = {{.limit = 5, .period = std::chrono::seconds(64)}};
  for (int grant = 0; grant < 3; ++grant)
    ASSERT_TRUE(redis.reserve_at(with_quota, kForever, 0).granted);
  const Value fields =
      admin(server_, {"HMGET", "ratelimit:{sums}", "quota_counts", "quota_sums", "quota_sums_of"});
  ASSERT_EQ(fields.elements.size(), 3u);
  EXPECT_EQ(fields.elements[1].text, "3");
  EXPECT_EQ(fields.elements[2].text, fields.elements[0].text);
  // An older ratelimit's two grants fill the window, and leave the sums as they were.
  std::string counts = "[[0,";
  for (int slot = 0; slot < 65; ++slot) counts += "0,";
  admin(server_, {"HSET", "ratelimit:{sums}", "quota_counts", counts + "5]]"});
  // Refused by the quota (the rate's wait is 3 ns): sums of 3 would have granted it.
  const Reservation refused = redis.reserve_at(with_quota, 1ms, 0);
  EXPECT_FALSE(refused.granted);
  EXPECT_EQ(refused.wait, 66s);
  EXPECT_EQ(redis.status_at("sums", 0)->quotas.at(0).used, 5);
  // The next grant, once the window has passed, writes sums for the counts again.
  EXPECT_TRUE(redis.reserve_at(with_quota, 0ns, 70000000).granted);
  EXPECT_EQ(admin(server_, {"HGET", "ratelimit:{sums}", "quota_sums"}).text, "1");
  EXPECT_TRUE(notes_.empty());
}

// A key with quotas lives until its quotas' slots have passed, not only until its rate's bucket
// is full again.
TEST_F(RedisStoreTest, KeyWithQuotasExpiresOnceTheirWindowsHavePassed) {
  Store redis = store_at(server_.unix_url());
  PermitRequest with_quota = request("quota", bursty(10));
  with_quota.quotas = {{.limit = 5, .period = std::chrono::seconds(64)}};
  redis.reserve(with_quota, real_waiter());
  // 66 slots of 1 s from the current one's start, and the margins.
  const Value ttl = admin(server_, {"PTTL", "ratelimit:{quota}"});
  EXPECT_GT(ttl.integer, 65000 + 2000 - 100);
  EXPECT_LE(ttl.integer, 66000 + 2000);
}

// The benchmarks (scripts/redis_bench.sh) load the library and call the function themselves, with
// ACQUIRE_ARGUMENTS: what `acquire --rate 1e9/s --key K` sends, a call the script serves as the
// common one.
TEST_F(RedisStoreTest, ReserveAsTheBenchCallsIt) {
  // The library is named as its function.
  EXPECT_EQ(admin(server_, library_load()).text, kRedisBucketFunction);
  const Value reply = admin(server_, {"FCALL", std::string(kRedisBucketFunction), "1",
                                      "ratelimit:{short}", "reserve_keeping", "", "1",
                                      "9223372036854775807", "1,bursty,1000000000,1,0,3,0,0,0,",
                                      "bursty", "0", "1000000000", "1", "permits si 1 time"});
  // Granted at once, and the key holds the caller's rate and schedule: the wait and the booking's
  // span say it all.
  ASSERT_EQ(reply.type, Value::Type::string);
  EXPECT_TRUE(reply.text.starts_with("0 ")) << reply.text;
  EXPECT_EQ(std::count(reply.text.begin(), reply.text.end(), ' '), 2) << reply.text;
  Store redis = store_at(server_.unix_url());
  const auto kept = redis.status("short").at(0);
  EXPECT_EQ(kept.params, bursty(1e9));
  EXPECT_EQ(kept.schedule, KeySchedule{});
  EXPECT_EQ(kept.notation, "permits si 1 time");
}

TEST(RedisPassword, RightPasswordWrongPasswordAndNone) {
  RedisServer server("s3cr3t");
  Store right(testing::settings_of(server.tcp_url(), kServerTimeout));
  EXPECT_TRUE(right.reserve(request("p", bursty(1)), real_waiter()).granted);
  Store over_unix(testing::settings_of(server.unix_url(), kServerTimeout));
  EXPECT_TRUE(over_unix.reserve(request("p", bursty(1)), real_waiter()).granted);

  const std::string wrong_url = "redis://:wrong@127.0.0.1:" + std::to_string(server.port());
  Store wrong(testing::settings_of(wrong_url, kServerTimeout));
  try {
    wrong.reserve(request("p", bursty(1)), real_waiter());
    FAIL() << "a wrong password was accepted";
  } catch (const StoreUnavailable& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.find("wrong"), std::string::npos) << message;
    EXPECT_NE(message.find("redis://:***@127.0.0.1:"), std::string::npos) << message;
    EXPECT_NE(message.find("WRONGPASS"), std::string::npos) << message;
  }
  Store none(testing::settings_of("unix://" + server.socket_path(), kServerTimeout));
  EXPECT_THROW(none.reserve(request("p", bursty(1)), real_waiter()), StoreUnavailable);
}

TEST(RedisFailures, ServerKilledMidRunIsUnavailableNotSigpipe) {
  RedisServer server;
  Store redis(testing::settings_of(server.tcp_url(), kServerTimeout));
  EXPECT_TRUE(redis.reserve(request("k", bursty(100)), real_waiter()).granted);
  server.stop(SIGKILL);
  // The first write to the dead connection may succeed; the ones after it would raise SIGPIPE.
  // Each request gives up at its deadline, not past the restart budget.
  for (int attempt = 0; attempt < 3; ++attempt) {
    PermitRequest permits = request("k", bursty(100));
    permits.deadline = real_waiter().now() + nanoseconds(200ms);
    EXPECT_THROW(redis.reserve(permits, real_waiter()), StoreUnavailable);
  }
  server.restart();
  EXPECT_TRUE(redis.reserve(request("k", bursty(100)), real_waiter()).granted);
}

// A server that closes a connection while a command is still going out (here a bulk longer than
// proto-max-bulk-len, refused at its header) makes the rest of the write fail: an error on
// every transport, never the death of the process by SIGPIPE (left at its default here).
TEST(RedisFailures, ConnectionClosedMidCommandIsAnErrorNotSigpipe) {
  RedisServer server({}, true);
  admin(server, {"CONFIG", "SET", "proto-max-bulk-len", "1mb"});
  TlsOptions tls_options;
  tls_options.ca_file = server.ca_file();
  const Tls tls(tls_options);
  const std::string too_long(16 << 20, 'x');
  for (const std::string& url : {server.unix_url(), server.tcp_url(), server.tls_url()}) {
    const Address address = parse_url(url);
    Deadline deadline(kServerTimeout);
    Connection connection(address, address.tls ? &tls : nullptr, deadline);
    EXPECT_THROW(connection.command({"ECHO", too_long}, deadline), StoreUnavailable) << url;
    EXPECT_FALSE(connection.open()) << url;
  }
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
}

// CLIENT KILL (as a restart or a proxy's idle timeout) closes the connection while it is idle:
// the next request finds it closed before sending anything, connects again and is booked once.
TEST_F(RedisStoreTest, ConnectionDroppedWhileIdleIsMadeAgainAndTheRequestBookedOnce) {
  for (const std::string& url : {server_.unix_url(), server_.tcp_url()}) {
    Store redis = store_at(url);
    const std::string key = "dropped" + std::to_string(url.size());
    EXPECT_EQ(redis.reserve(request(key, bursty(1)), real_waiter()).wait, 0ns);
    admin(server_, {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    const Reservation again = redis.reserve(request(key, bursty(1)), real_waiter());
    EXPECT_TRUE(again.granted);
    // One permit booked before at 1/s: the next is a second away, not two.
    EXPECT_GT(again.wait, 900ms);
    EXPECT_LE(again.wait, 1s);
    sigset_t pending;
    sigpending(&pending);
    EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
  }
  ASSERT_EQ(notes_.size(), 2U);
  EXPECT_NE(notes_[0].find(": the server closed the connection; connecting again"),
            std::string::npos)
      << notes_[0];
}

TEST_F(RedisStoreTest, PingAnswersWhileTheServerDoes) {
  Store redis = store_at(server_.unix_url());
  EXPECT_NO_THROW(redis.ping("k", real_waiter()));
  server_.stop(SIGKILL);
  EXPECT_THROW(redis.ping("k", real_waiter()), StoreUnavailable);
  server_.restart();
  EXPECT_NO_THROW(redis.ping("k", real_waiter()));
}

TEST(RedisFailures, PausedServerTimesOut) {
  RedisServer server;
  Store redis(testing::settings_of(server.unix_url(), 200ms));
  EXPECT_TRUE(redis.reserve(request("k", bursty(100)), real_waiter()).granted);
  admin(server, {"CLIENT", "PAUSE", "3000", "ALL"});
  const auto start = std::chrono::steady_clock::now();
  try {
    redis.reserve(request("k", bursty(100)), real_waiter());
    FAIL() << "a paused server answered";
  } catch (const StoreUnavailable& error) {
    EXPECT_NE(std::string(error.what()).find("no reply within 200ms"), std::string::npos)
        << error.what();
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 190ms);
  EXPECT_LT(waited, 1500ms);
}

// The wait for the answer counts against the request's deadline: a paused server refuses at the
// deadline (or after kAnswerGrace for one already due), long before --redis-timeout.
TEST(RedisFailures, PausedServerRefusesAtTheRequestsDeadline) {
  RedisServer server;
  Store redis(testing::settings_of(server.unix_url(), 30s));
  EXPECT_TRUE(redis.reserve(request("k", bursty(100)), real_waiter()).granted);
  for (const nanoseconds timeout : {nanoseconds::zero(), nanoseconds(300ms)}) {
    admin(server, {"CLIENT", "PAUSE", "1500", "ALL"});
    PermitRequest permits = request("k", bursty(100));
    const auto start = std::chrono::steady_clock::now();
    permits.deadline = real_waiter().now() + timeout;
    const Reservation refused = redis.reserve(permits, real_waiter());
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_FALSE(refused.granted);
    EXPECT_EQ(refused.signal, 0);
    EXPECT_EQ(refused.wait, 0ns);
    EXPECT_GE(waited, std::max(timeout, nanoseconds(kAnswerGrace)) - 10ms);
    EXPECT_LT(waited, timeout + 1s);
    // No client can end a pause of them all: it is waited out.
    std::this_thread::sleep_until(start + 1600ms);
  }
  // An answer in time decides, and the connection closed by the refusal is made again.
  PermitRequest permits = request("fresh", bursty(1));
  permits.deadline = real_waiter().now();
  EXPECT_TRUE(redis.reserve(permits, real_waiter()).granted);
  permits.deadline = real_waiter().now();
  EXPECT_FALSE(redis.reserve(permits, real_waiter()).granted);
}

// The real clock and waits, and a stop signal (SIGINT) that comes during the first wait for a
// descriptor (a reply), or with `before_the_call`, before anything; once come, it stays, as
// SignalWaiter's does.
class StopSignalWaiter final : public io::Waiter {
 public:
  explicit StopSignalWaiter(bool before_the_call) : received_(before_the_call ? SIGINT : 0) {}
  nanoseconds now() override { return real_waiter().now(); }
  int wait_until(nanoseconds deadline, std::span<pollfd> fds) override {
    if (received_ != 0) return received_;
    if (fds.empty()) return real_waiter().wait_until(deadline);
    real_waiter().wait_until(std::min(deadline, now() + nanoseconds(100ms)), fds);
    return received_ = SIGINT;
  }

 private:
  int received_;
};

TEST(RedisInterruption, StopSignalEndsTheWaitForAPausedServer) {
  RedisServer server;
  Store redis(testing::settings_of(server.unix_url(), 30s));
  EXPECT_TRUE(redis.reserve(request("k", bursty(100)), real_waiter()).granted);
  admin(server, {"CLIENT", "PAUSE", "500", "ALL"});
  StopSignalWaiter stop(false);
  const Reservation interrupted = redis.reserve(request("k", bursty(100)), stop);
  EXPECT_EQ(interrupted.signal, SIGINT);
  EXPECT_FALSE(interrupted.granted);
  // The connection that was cut short is not used again: the next call connects afresh and
  // waits out the pause.
  EXPECT_TRUE(redis.reserve(request("k", bursty(100)), real_waiter()).granted);
}

TEST(RedisInterruption, StopSignalBeforeTheCallSendsNothing) {
  RedisServer server;
  Store redis(testing::settings_of(server.unix_url(), kServerTimeout));
  StopSignalWaiter stop(true);
  EXPECT_EQ(redis.reserve(request("k", bursty(1)), stop).signal, SIGINT);
  EXPECT_TRUE(redis.status("k").empty());
  EXPECT_TRUE(redis.reserve(request("k", bursty(1)), real_waiter()).granted);
  EXPECT_EQ(redis.reserve(request("k", bursty(1)), stop).signal, SIGINT);
  // One permit booked at 1/s, not two.
  const std::vector<BucketStatus> buckets = redis.status("k");
  ASSERT_EQ(buckets.size(), 1U);
  EXPECT_LE(buckets[0].next_free_in, 1s);
}

// A server that is not there may be restarting: it is waited for within the restart budget,
// then unavailable, said with how long it was waited for.
TEST(RedisFailures, NoServerIsUnavailableAfterTheRestartBudget) {
  testing::TempDir dir;
  Store redis(testing::settings_of("unix://" + dir.string() + "/none.sock", kServerTimeout));
  const auto start = std::chrono::steady_clock::now();
  try {
    redis.reserve(request("k", bursty(1)), real_waiter());
    FAIL();
  } catch (const StoreUnavailable& error) {
    EXPECT_EQ(std::string(error.what()),
              "Redis at unix://" + dir.string() + "/none.sock: No such file or directory for 5s");
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, kRestartBudget - 300ms);
  EXPECT_LT(waited, kRestartBudget + 2s);
}

// A restart (the port closed 0.3 s, then open again) costs the request that meets it a wait, not
// a failure: it is decided once the server answers, booked once.
TEST_F(RedisStoreTest, ARestartIsWaitedFor) {
  Store redis = store_at(server_.tcp_url());
  EXPECT_EQ(redis.reserve(request("r", bursty(1)), real_waiter()).wait, 0ns);
  server_.stop(SIGTERM);
  // The request waits in a thread of its own: the server is started by this one, which it dies
  // with.
  Reservation after;
  bool threw = false;
  nanoseconds waited{};
  std::thread waiting([&] {
    const auto start = std::chrono::steady_clock::now();
    try {
      after = redis.reserve(request("r", bursty(1)), real_waiter());
    } catch (const StoreUnavailable&) {
      threw = true;
    }
    waited = std::chrono::steady_clock::now() - start;
  });
  std::this_thread::sleep_for(300ms);
  server_.restart();
  waiting.join();
  EXPECT_FALSE(threw);
  EXPECT_TRUE(after.granted);
  // The server started again empty: a fresh bucket.
  EXPECT_EQ(after.wait, 0ns);
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 2s);
  ASSERT_EQ(notes_.size(), 1U);
  EXPECT_NE(notes_[0].find("; connecting again"), std::string::npos) << notes_[0];
}

// The connections `server` has accepted so far, the one that asks included: one per try of a
// request that a failover met (each try finds the master again, and sends the request once on the
// connection it makes), and one per call of this.
long long connections_to(const RedisServer& server) {
  const std::string stats = admin(server, {"INFO", "stats"}).text;
  const std::string field = "total_connections_received:";
  return std::stoll(stats.substr(stats.find(field) + field.size()));
}

// One retry loop per request (RetryPolicy), under Sentinel, against a master that hangs on writes
// (CLIENT PAUSE WRITE): each script call goes out and its reply never comes, so it may have run.
// A give-back or a rate set, which would count twice, is sent once: the request gives up after
// its one try, not after the failover budget, the give-back sent again every 50 ms meanwhile (as
// the topology's own loop did). A reservation is sent once per try, and answered at its one
// deadline however long the failover budget.
TEST(RedisRetries, AFailoverSendsAgainOnlyWhatMayRunTwiceOncePerTry) {
  RedisServer master;
  RedisServer sentinel({}, false, false, master.port());
  std::vector<std::string> notes;
  Store redis(testing::settings_of(
                  "redis-sentinel://127.0.0.1:" + std::to_string(sentinel.port()) + "/cache", 200ms,
                  {}, 3s),
              [&](const std::string& note) { notes.push_back(note); });
  EXPECT_TRUE(redis.reserve(request("k", bursty(1)), real_waiter()).granted);
  admin(master, {"CLIENT", "PAUSE", "60000", "WRITE"});

  long long before = connections_to(master);
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(redis.give_back(UnusedPermits{.key = "k", .permits = 1}), StoreUnavailable);
  // Sent on the master's connection kept from the first reservation: none more.
  EXPECT_EQ(connections_to(master) - before - 1, 0) << "give_back sent more than once";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);

  before = connections_to(master);
  start = std::chrono::steady_clock::now();
  RateChange change;
  change.key = "k";
  change.permits_per_second = 5;
  EXPECT_THROW(redis.set_rate(change), StoreUnavailable);
  EXPECT_EQ(connections_to(master) - before - 1, 1) << "set_rate sent more than once";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);

  notes.clear();
  before = connections_to(master);
  start = std::chrono::steady_clock::now();
  PermitRequest reservation = request("k", bursty(1));
  reservation.deadline = real_waiter().now() + 1s;
  EXPECT_FALSE(redis.reserve(reservation, real_waiter()).granted);
  const auto waited = std::chrono::steady_clock::now() - start;
  const long long sent = connections_to(master) - before - 1;
  // A try of 200 ms, then one after each failover said.
  const auto tries =
      static_cast<long long>(std::count_if(
          notes.begin(), notes.end(),
          [](const std::string& note) {
            return note.find("asking the sentinels for the master") != std::string::npos;
          })) +
      1;
  EXPECT_GE(sent, 2);
  EXPECT_LE(sent, tries);
  EXPECT_GE(waited, 950ms);
  EXPECT_LT(waited, 1s + 700ms);
  admin(master, {"CLIENT", "UNPAUSE"});
}

}  // namespace
}  // namespace ratelimit::stores::redis
