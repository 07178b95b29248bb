#include "stores/redis/redis_script_protocol.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "cli/commands.hpp"
#include "errors.hpp"

// The script's requests and replies without a server (tests/redis/ runs them through one).
namespace ratelimit::stores::redis {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using Strings = std::vector<std::string>;

constexpr std::string_view kServer = "Redis at unix:///tmp/r.sock";

Value text(std::string value) {
  return {.type = Value::Type::string, .integer = 0, .text = std::move(value), .elements = {}};
}
Value integer(long long value) {
  return {.type = Value::Type::integer, .integer = value, .text = {}, .elements = {}};
}
Value table(std::vector<Value> elements) {
  return {.type = Value::Type::array, .integer = 0, .text = {}, .elements = std::move(elements)};
}
Value texts(const Strings& values) {
  std::vector<Value> elements;
  for (const std::string& value : values) elements.push_back(text(value));
  return table(std::move(elements));
}

PermitRequest bursty_request() {
  PermitRequest request;
  request.key = "api";
  request.params.permits_per_second = 1e9;
  request.params.max_burst_seconds = 1;
  return request;
}

// The script's reply refusing a request: 0 and "WAIT [quota] [backoff PAUSE]".
Value refusal(std::string words) { return table({integer(0), text(std::move(words))}); }

// What a decoded reservation says that a reply's words set, as one line to compare.
std::string said_by(const Reservation& decoded) {
  std::string line = (decoded.granted ? "granted after " : "refused after ") +
                     std::to_string(decoded.wait.count()) + " ns";
  if (decoded.booked != BookingSpan{})
    line += ", booked " + std::to_string(decoded.booked.from) + "-" +
            std::to_string(decoded.booked.until);
  if (decoded.held_by_quota) line += ", held by quota";
  if (decoded.backing_off) line += ", backing off";
  if (decoded.paused_for != 0ns)
    line += ", paused " + std::to_string(decoded.paused_for.count()) + " ns";
  return line;
}

// Each reply of a request for key api, and what it must be decoded to (said_by()).
void expect_decoded(const std::vector<std::pair<Value, std::string>>& replies) {
  for (std::size_t i = 0; i < replies.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "reply #" << i);
    EXPECT_EQ(said_by(decode_reservation(replies[i].first, bursty_request(), kServer).reservation),
              replies[i].second);
  }
}

// What the command would print and return if `decode` threw.
std::pair<int, std::string> run_decoding(const std::function<void()>& decode) {
  ::testing::internal::CaptureStderr();
  const int status = cli::run_command(cli::Command{nullptr, [&] {
                                                     decode();
                                                     return 0;
                                                   }});
  return {status, ::testing::internal::GetCapturedStderr()};
}

TEST(RedisScriptProtocol, ReserveOfAKeyWithAQuota) {
  PermitRequest request = bursty_request();
  request.quotas = {{.limit = 1000000000000000, .period = 1h}};
  EXPECT_EQ(encode_reserve(request, nanoseconds::max(), std::nullopt),
            (Strings{"reserve", "", "1", "9223372036854775807",
                     "1,bursty,1000000000,1,0,3,0,0,1000000000000000/3600000000000/56250000,0,",
                     "bursty", "0", "1000000000", "1", "1000000000000000", "56250000"}));
}

TEST(RedisScriptProtocol, AReserveThatRefusesAQuotasWaitSaysSoAfterItsTimeout) {
  PermitRequest request = bursty_request();
  request.quotas = {{.limit = 3, .period = 1h}};
  request.refuse_quota_wait = true;
  EXPECT_EQ(encode_reserve(request, 5ms, std::nullopt).at(kArgTimeout - 1), "5000000 quota");
  request.refuse_quota_wait = false;
  EXPECT_EQ(encode_reserve(request, 5ms, std::nullopt).at(kArgTimeout - 1), "5000000");
}

TEST(RedisScriptProtocol, EachReserveArgumentAtItsNamedPosition) {
  PermitRequest request;
  request.key = "k";
  request.params.shape = BucketShape::warming_up;
  request.params.permits_per_second = 2.5;
  request.params.warmup = 3s;
  request.params.cold_factor = 4;
  request.params.pay_first = true;
  request.permits = 7;
  request.schedule = {.timetable = "9-17 5/s", .entry_until = 1700000000};
  request.quotas = {{.limit = 50, .period = 2s}, {.limit = 9, .period = 1min}};
  request.notation = "2.5/s";
  const Strings arguments = encode_reserve(request, 5ms, 1234);
  ASSERT_EQ(arguments.size(), kArgFirstQuotaWarmingUp - 1 + 2 * 2 + 1);
  const auto at = [&](std::size_t position) { return arguments[position - 1]; };
  EXPECT_EQ(at(kArgOperation), "reserve");
  EXPECT_EQ(at(kArgTime), "1234");
  EXPECT_EQ(at(kArgPermits), "7");
  EXPECT_EQ(at(kArgTimeout), "5000000");
  EXPECT_EQ(at(kArgTexts),
            "1,warming_up,2.5,1,3000000000,4,0,1,50/2000000000/31250 "
            "9/60000000000/937500,1700000000,9-17 5/s");
  EXPECT_EQ(at(kArgShape), "warming_up");
  EXPECT_EQ(at(kArgPayFirst), "1");
  EXPECT_EQ(at(kArgRate), "2.5");
  EXPECT_EQ(at(kArgWarmup), "3000000000");
  EXPECT_EQ(at(kArgCold), "4");
  EXPECT_EQ(at(kArgFirstQuotaWarmingUp), "50");
  EXPECT_EQ(at(kArgFirstQuotaWarmingUp + 1), "31250");
  EXPECT_EQ(at(kArgFirstQuotaWarmingUp + 2), "9");
  EXPECT_EQ(at(kArgFirstQuotaWarmingUp + 3), "937500");
  EXPECT_EQ(arguments.back(), "2.5/s");
  // Keeping the key's parameters, the notation goes too (for a new key); a request without one
  // (a pipe's after its first) sends none.
  request.apply_params = false;
  const Strings keeping = encode_reserve(request, 5ms, std::nullopt);
  EXPECT_EQ(keeping.front(), "reserve_keeping");
  EXPECT_EQ(keeping[kArgTime - 1], "");
  EXPECT_EQ(keeping.back(), "2.5/s");
  request.notation.clear();
  EXPECT_EQ(encode_reserve(request, 5ms, std::nullopt).size(), kArgFirstQuotaWarmingUp - 1 + 2 * 2);
}

TEST(RedisScriptProtocol, OtherOperationsAreEncoded) {
  EXPECT_EQ(encode_status(std::nullopt), (Strings{"status", ""}));
  EXPECT_EQ(encode_give_back(3, std::nullopt, 10), (Strings{"give_back", "10", "3"}));
  EXPECT_EQ(encode_give_back(3, BookingSpan{.from = 5, .until = 8}, std::nullopt),
            (Strings{"give_back", "", "3", "5", "8"}));
  EXPECT_EQ(encode_set_rate(0.5, {.timetable = "t", .entry_until = 9}, 11),
            (Strings{"set_rate", "11", "0.5", "t", "9"}));
  // All the settings (set --key with more than a rate), as a reserve's texts.
  EXPECT_EQ(encode_set_rate(0.5, {.timetable = "t", .entry_until = 9}, 11,
                            stores::KeySettings{.params = {.permits_per_second = 0.5},
                                                .timetable = "t",
                                                .quotas = {{.limit = 3, .period = 1s}}}),
            (Strings{"set_rate", "11", "0.5", "t", "9",
                     "1,bursty,0.5,1,0,3,0,0,3/1000000000/15625,9,t"}));
}

TEST(RedisScriptProtocol, ReplyOfAKeyAsRequested) {
  const Reservation granted =
      decode_reservation(text("5 10 20"), bursty_request(), kServer).reservation;
  EXPECT_EQ(granted.key_permits_per_second, 1e9);
  EXPECT_FALSE(granted.replaced_params);
  expect_decoded({
      {text("5 10 20"), "granted after 5 ns, booked 10-20"},
      {refusal("700"), "refused after 700 ns"},
      // A wait that a quota set says so.
      {text("5 10 20 quota"), "granted after 5 ns, booked 10-20, held by quota"},
      {refusal("700 quota"), "refused after 700 ns, held by quota"},
  });
}

TEST(RedisScriptProtocol, ReplyOfAKeyThatKeptOrReplacedItsParameters) {
  const PermitRequest request = bursty_request();
  Value kept = table(
      {integer(0), text("9"), integer(0), text("a damaged bucket"), text("9-17 5/s"), text("5")});
  const DecodedReservation decoded = decode_reservation(kept, request, kServer);
  EXPECT_EQ(decoded.problem, "a damaged bucket");
  EXPECT_EQ(decoded.reservation.key_timetable, "9-17 5/s");
  EXPECT_EQ(decoded.reservation.key_permits_per_second, 5);

  Value replaced = kept;
  replaced.elements[kReplyReplaced - 1] = integer(1);
  for (const char* field :
       {"warming_up", "3", "1", "2000000000", "3", "0", "1", "old", "50/2000000000/31250"})
    replaced.elements.push_back(text(field));
  ASSERT_EQ(replaced.elements.size(), kReplacedFields);
  const Reservation reservation = decode_reservation(replaced, request, kServer).reservation;
  ASSERT_TRUE(reservation.replaced_params);
  EXPECT_EQ(reservation.replaced_params->shape, BucketShape::warming_up);
  EXPECT_EQ(reservation.replaced_params->permits_per_second, 3);
  EXPECT_EQ(reservation.replaced_params->warmup, 2s);
  EXPECT_TRUE(reservation.replaced_params->pay_first);
  EXPECT_EQ(reservation.replaced_timetable, "old");
  EXPECT_EQ(reservation.replaced_quotas, (std::vector<QuotaParams>{{.limit = 50, .period = 2s}}));
  EXPECT_FALSE(reservation.followed);

  // The key's settings, which a request keeping them follows: to tell, or not.
  for (const std::int64_t flag : {kReplyFollowedTold, kReplyFollowed}) {
    Value followed = replaced;
    followed.elements[kReplyReplaced - 1] = integer(flag);
    const Reservation following = decode_reservation(followed, request, kServer).reservation;
    EXPECT_FALSE(following.replaced_params);
    ASSERT_TRUE(following.followed);
    EXPECT_EQ(following.followed->params.permits_per_second, 3);
    EXPECT_EQ(following.followed->timetable, "old");
    EXPECT_EQ(following.followed->quotas, (std::vector<QuotaParams>{{.limit = 50, .period = 2s}}));
    EXPECT_EQ(following.tell_followed, flag == kReplyFollowedTold);
  }
}

TEST(RedisScriptProtocol, StatusReply) {
  EXPECT_FALSE(decode_status(Value{}, "k", kServer));
  const auto unusable = decode_status(texts({"unusable", "a damaged bucket"}), "k", kServer);
  ASSERT_TRUE(unusable);
  EXPECT_EQ(unusable->problem, "a damaged bucket");
  const auto status =
      decode_status(texts({"bursty", "10", "2", "0", "3", "1", "0", "4.5", "100", "9-17 5/s",
                           "1700000000", "10/s", "", "50", "2000000000", "7", "250"}),
                    "k", kServer);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->key, "k");
  EXPECT_EQ(status->params.permits_per_second, 10);
  EXPECT_TRUE(status->params.start_full);
  EXPECT_EQ(status->stored_permits, 4.5);
  EXPECT_EQ(status->next_free_in, 100ns);
  EXPECT_EQ(status->schedule, (KeySchedule{.timetable = "9-17 5/s", .entry_until = 1700000000}));
  EXPECT_EQ(status->notation, "10/s");
  ASSERT_EQ(status->quotas.size(), 1u);
  EXPECT_EQ(status->quotas[0].params, (QuotaParams{.limit = 50, .period = 2s}));
  EXPECT_EQ(status->quotas[0].used, 7);
  EXPECT_EQ(status->quotas[0].next_free_in, 250ns);
  // Never throttled: the rate in force is the configured rate.
  EXPECT_EQ(status->rate_in_force, 10);
  EXPECT_EQ(status->throttles, 0);
}

TEST(RedisScriptProtocol, StatusOfAKeyThatBacksOff) {
  const auto status = decode_status(texts({"bursty", "10", "1", "0", "3", "0", "0", "0", "100", "",
                                           "0", "", "7.5 2000000000 3 400"}),
                                    "k", kServer);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->params.permits_per_second, 10);
  EXPECT_EQ(status->rate_in_force, 7.5);
  EXPECT_EQ(status->paused_for, 2s);
  EXPECT_EQ(status->throttles, 3);
  EXPECT_EQ(status->last_throttle_ago, 400ns);
}

TEST(RedisScriptProtocol, ThrottleIsEncodedAndItsReplyDecoded) {
  EXPECT_EQ(encode_throttle({.key = "k", .sent_before = 1s, .retry_after = 30s}, 10),
            (Strings{"throttle", "10", "1000000000", "30000000000"}));
  EXPECT_EQ(encode_throttle({.key = "k"}, std::nullopt), (Strings{"throttle", "", "0", "0"}));
  EXPECT_FALSE(decode_throttle(Value{}, kServer));
  const auto result =
      decode_throttle(table({integer(1), integer(0), text("2000000000"), text("14")}), kServer);
  ASSERT_TRUE(result);
  EXPECT_TRUE(result->outcome.new_event);
  EXPECT_FALSE(result->outcome.pause_extended);
  EXPECT_EQ(result->paused_for, 2s);
  EXPECT_EQ(result->rate_in_force, 14);
}

TEST(RedisScriptProtocol, AWaitOnAKeyThatBacksOffSaysItsPause) {
  expect_decoded({
      {text("5 10 20 quota backoff 3"),
       "granted after 5 ns, booked 10-20, held by quota, backing off, paused 3 ns"},
      {refusal("700 backoff 0"), "refused after 700 ns, backing off"},
      {text("5 10 20"), "granted after 5 ns, booked 10-20"},
  });
}

TEST(RedisScriptProtocol, GiveBackAndSetRateReplies) {
  EXPECT_FALSE(decode_give_back(Value{}, kServer));
  EXPECT_FALSE(decode_give_back(integer(0), kServer));
  EXPECT_TRUE(decode_give_back(integer(1), kServer));
  EXPECT_FALSE(decode_set_rate(Value{}, kServer));
  EXPECT_TRUE(decode_set_rate(integer(1), kServer));
}

// A reply the script would never give is one line and exit 69 (the store cannot be used), never
// a crash or an out-of-range read.
TEST(RedisScriptProtocol, MalformedRepliesAreOneLineAndExit69) {
  const PermitRequest request = bursty_request();
  const auto reserve = [&](Value reply) {
    return run_decoding([&] { decode_reservation(reply, request, kServer); });
  };
  using Result = std::pair<int, std::string>;
  const std::string prefix =
      "ratelimit: Redis at unix:///tmp/r.sock: unexpected reply to the "
      "bucket script's ";
  EXPECT_EQ(reserve(table({integer(1), text("5 1 2"), integer(0)})),
            (Result{69, prefix + "reserve: 3 fields\n"}));
  EXPECT_EQ(reserve(table({})), (Result{69, prefix + "reserve: 0 fields\n"}));
  EXPECT_EQ(reserve(text("soon")), (Result{69, prefix + "reserve: the wait is not a number\n"}));
  EXPECT_EQ(reserve(text("5")), (Result{69, prefix + "reserve: a grant without its span\n"}));
  EXPECT_EQ(reserve(text("5 1")), (Result{69, prefix + "reserve: the span is not two numbers\n"}));
  EXPECT_EQ(reserve(text("5 quota")), (Result{69, prefix + "reserve: a grant without its span\n"}));
  EXPECT_EQ(reserve(table({integer(0), text("5 1 2")})),
            (Result{69, prefix + "reserve: a refusal with a span\n"}));
  EXPECT_EQ(reserve(table({integer(2), text("5")})),
            (Result{69, prefix + "reserve: field 1 is not 0 or 1\n"}));
  EXPECT_EQ(reserve(table({integer(0), integer(5)})),
            (Result{69, prefix + "reserve: field 2 is not a text\n"}));
  EXPECT_EQ(reserve(table({integer(0), text("5"), integer(0), text(""), text(""), text("x")})),
            (Result{69, prefix + "reserve: field 6 is not a number\n"}));
  EXPECT_EQ(reserve(table({integer(0), text("5"), integer(1), text(""), text(""), text("1")})),
            (Result{69, prefix + "reserve: field 3 disagrees with 6 fields\n"}));
  EXPECT_EQ(reserve(Value{}), (Result{69, prefix + "reserve: not a table\n"}));

  const auto status = [&](Value reply) {
    return run_decoding([&] { decode_status(reply, "k", kServer); });
  };
  Strings fields{"bursty", "10", "2", "0", "3", "1", "0", "4.5", "100", "", "0", "", ""};
  EXPECT_EQ(status(texts(Strings(fields.begin(), fields.end() - 1))),
            (Result{69, prefix + "status: 12 fields\n"}));
  fields[kStatusBackoff - 1] = "7.5 1";
  EXPECT_EQ(status(texts(fields)), (Result{69, prefix + "status: field 13 is no back-off\n"}));
  fields[kStatusBackoff - 1] = "";
  fields[kStatusStored - 1] = "many";
  EXPECT_EQ(status(texts(fields)), (Result{69, prefix + "status: field 8 is not a number\n"}));
  fields[kStatusStored - 1] = "4.5";
  for (const char* quota : {"50", "2000000000", "seven", "250"}) fields.push_back(quota);
  EXPECT_EQ(status(texts(fields)), (Result{69, prefix + "status: field 16 is not a number\n"}));
  EXPECT_EQ(status(integer(1)), (Result{69, prefix + "status: not a table\n"}));

  EXPECT_EQ(run_decoding([] { decode_throttle(table({integer(1)}), kServer); }),
            (Result{69, prefix + "throttle: 1 fields\n"}));
  EXPECT_EQ(reserve(text("5 1 2 backoff soon")),
            (Result{69, prefix + "reserve: the pause is not a number\n"}));
  EXPECT_EQ(run_decoding([] { decode_give_back(integer(2), kServer); }),
            (Result{69, prefix + "give_back: not 0 or 1\n"}));
  EXPECT_EQ(run_decoding([] { decode_set_rate(text("1"), kServer); }),
            (Result{69, prefix + "set_rate: not 1\n"}));
}

// A batch carries each request's ARGV after its count, and its reply gives each request its own:
// a whole-call error (nothing ran) is each one's; any other reply but as many replies as requests
// is one line and exit 69 for each, never a reply taken for another request's.
TEST(RedisScriptProtocol, BatchOfRequestsAndItsReplies) {
  Strings batch{std::string(kBatchOperation)};
  add_to_batch(batch, encode_status(std::nullopt));
  add_to_batch(batch, encode_give_back(3, std::nullopt, 7));
  EXPECT_EQ(batch, (Strings{"batch", "2", "status", "", "3", "give_back", "7", "3"}));

  const Value nil;
  const auto replies = decode_batch(table({integer(1), nil, text("5")}), 3, kServer);
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0].integer, 1);
  EXPECT_EQ(replies[1].type, Value::Type::nil);
  EXPECT_EQ(replies[2].text, "5");
  const Value missing{
      .type = Value::Type::error, .integer = 0, .text = "ERR Function not found", .elements = {}};
  EXPECT_TRUE(function_missing(missing));
  const auto refused = decode_batch(missing, 2, kServer);
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].text, missing.text);
  EXPECT_EQ(refused[1].text, missing.text);

  using Result = std::pair<int, std::string>;
  const std::string prefix =
      "ratelimit: Redis at unix:///tmp/r.sock: unexpected reply to the bucket script's batch: ";
  EXPECT_EQ(run_decoding([&] {
              decode_batch(table({integer(1), nil}), 3, kServer);
            }),
            (Result{69, prefix + "2 replies for 3 requests\n"}));
  EXPECT_EQ(run_decoding([&] { decode_batch(text("5"), 1, kServer); }),
            (Result{69, prefix + "not a table\n"}));
}

}  // namespace
}  // namespace ratelimit::stores::redis
