#include "backends/redis/redis_backend.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

#include "backends/redis/redis_script.hpp"
#include "errors.hpp"

namespace ratelimit::backends {
namespace {

using std::chrono::nanoseconds;

constexpr std::string_view kKeyPrefix = "ratelimit:{";
constexpr std::string_view kKeySuffix = "}";

template <typename Number>
std::optional<Number> parse_number(std::string_view text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Numbers as the script reads them: the shortest text that reads back as the same double.
std::string number_text(double value) { return fmt::format("{}", value); }

std::string shape_text(BucketShape shape) {
  return shape == BucketShape::warming_up ? "warming_up" : "bursty";
}

// A quota's slot length in whole microseconds, as the core counts it.
std::int64_t slot_micros(const QuotaParams& quota) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             Quota(quota, nanoseconds::zero()).slot_length())
      .count();
}

// Quotas as a key keeps them in `quotas`: LIMIT/PERIOD_NS/SLOT_US, joined by blanks.
std::string quota_specs(const std::vector<QuotaParams>& quotas) {
  std::string specs;
  for (const QuotaParams& quota : quotas)
    specs += fmt::format("{}{}/{}/{}", specs.empty() ? "" : " ", quota.limit, quota.period.count(),
                         slot_micros(quota));
  return specs;
}

// The request's parameters, quotas and schedule as the script keeps them in a key's `texts` (its
// format version first, the quotas if any before the schedule, the timetable last), so that the
// script compares them with the key's at once.
std::string request_texts(const PermitRequest& request) {
  const BucketParams& params = request.params;
  const std::string quotas = request.quotas.empty() ? "" : quota_specs(request.quotas) + ",";
  return fmt::format("1,{},{},{},{},{},{},{},{}{},{}", shape_text(params.shape),
                     number_text(params.permits_per_second), number_text(params.max_burst_seconds),
                     params.warmup.count(), number_text(params.cold_factor),
                     params.start_full ? "1" : "0", params.pay_first ? "1" : "0", quotas,
                     request.schedule.entry_until, request.schedule.timetable);
}

// The quotas in a text as quota_specs() writes them; nothing if it holds anything else.
std::optional<std::vector<QuotaParams>> parsed_quota_specs(std::string_view text) {
  std::vector<QuotaParams> quotas;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find(' '), text.size());
    const std::string_view spec = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const std::size_t first_slash = spec.find('/');
    const std::size_t second_slash = spec.find('/', first_slash + 1);
    if (first_slash == std::string_view::npos || second_slash == std::string_view::npos)
      return std::nullopt;
    const auto limit = parse_number<std::int64_t>(spec.substr(0, first_slash));
    const auto period =
        parse_number<std::int64_t>(spec.substr(first_slash + 1, second_slash - first_slash - 1));
    if (!limit || !period) return std::nullopt;
    quotas.push_back({.limit = *limit, .period = nanoseconds(*period)});
  }
  return quotas;
}

std::string now_argument(std::optional<std::int64_t> now_micros) {
  return now_micros ? std::to_string(*now_micros) : std::string();
}

// The wait of a reply, "WAIT" or, granted, "WAIT FROM UNTIL": the booking's span follows in the
// same text, which the server makes at a fraction of the cost of more fields. Into `reservation`;
// false if the text is neither.
bool read_wait(std::string_view text, Reservation& reservation) {
  const std::size_t first = text.find(' ');
  const auto wait = parse_number<std::int64_t>(text.substr(0, first));
  if (!wait) return false;
  reservation.wait = nanoseconds(*wait);
  if (first == std::string_view::npos) return !reservation.granted;
  const std::string_view span = text.substr(first + 1);
  const std::size_t second = span.find(' ');
  if (second == std::string_view::npos) return false;
  const auto from = parse_number<std::int64_t>(span.substr(0, second));
  const auto until = parse_number<std::int64_t>(span.substr(second + 1));
  if (!from || !until || !reservation.granted) return false;
  reservation.booked = {.from = *from, .until = *until};
  return true;
}

}  // namespace

std::string redis_key(const std::string& key) {
  return std::string(kKeyPrefix) + key + std::string(kKeySuffix);
}

RedisBackend::RedisBackend(RedisDeployment deployment, std::chrono::milliseconds timeout,
                           Notify notify, const RedisTlsOptions& tls,
                           std::chrono::milliseconds failover_timeout, Notify warn)
    : notify_(notify),
      timeout_(timeout),
      topology_(std::move(deployment), timeout, failover_timeout, std::move(notify),
                std::move(warn), tls) {}

void RedisBackend::unexpected_reply(const RedisValue& reply) const {
  throw BackendUnavailable("Redis at " + shown_url() + ": " +
                           (reply.type == RedisValue::Type::error
                                ? explain_refusal(reply.text)
                                : std::string("unexpected reply to the bucket script")));
}

RedisValue RedisBackend::run_script(const std::string& key, std::vector<std::string> arguments,
                                    RedisDeadline& deadline) {
  std::vector<std::string> call{"EVALSHA", std::string(kRedisBucketScriptSha1), "1",
                                redis_key(key)};
  call.insert(call.end(), arguments.begin(), arguments.end());
  const std::string bucket_key = redis_key(key);
  RedisValue reply = command(bucket_key, call, deadline);
  // NOSCRIPT: the script did not run, so running it with EVAL cannot book twice. EVAL also
  // caches it for the next EVALSHA (a server started again has forgotten it).
  if (reply.type == RedisValue::Type::error && reply.text.starts_with("NOSCRIPT")) {
    call[0] = "EVAL";
    call[1] = kRedisBucketScript;
    reply = command(bucket_key, call, deadline);
  }
  if (reply.type == RedisValue::Type::error) {
    // The connection may be fine, but the server refuses (NOAUTH, OOM, BUSY, a broken script).
    unexpected_reply(reply);
  }
  return reply;
}

RedisValue RedisBackend::command(const std::string& bucket_key,
                                 const std::vector<std::string>& arguments,
                                 RedisDeadline& deadline) {
  try {
    return send(bucket_key, arguments, deadline);
  } catch (const RedisConnectionLost& lost) {
    if (lost.sent() || deadline.passed()) throw;
    notify_(std::string(lost.what()) + "; connecting again");
    return send(bucket_key, arguments, deadline);
  }
}

RedisValue RedisBackend::send(const std::string& bucket_key,
                              const std::vector<std::string>& arguments, RedisDeadline& deadline) {
  if (relay_) {
    if (auto reply = relay_->command(bucket_key, arguments, deadline)) return std::move(*reply);
    relay_.reset();
  }
  return topology_.command(bucket_key, arguments, deadline);
}

void RedisBackend::connect(const std::string& bucket_key, RedisDeadline& deadline) {
  if (!relay_) topology_.connect(bucket_key, deadline);
}

Reservation RedisBackend::reserve(const PermitRequest& request, io::Waiter& waiter) {
  RedisDeadline round_trip = operation_deadline(&waiter);
  if (request.deadline != nanoseconds::max())
    round_trip.refuse_after(std::max(request.deadline, waiter.now() + nanoseconds(kAnswerGrace)));
  try {
    for (bool sent_again = false;; sent_again = true) {
      try {
        // Connected first, so that what is left of the request's timeout when the script runs
        // is what the server judges by.
        connect(redis_key(request.key), round_trip);
        const nanoseconds timeout =
            request.deadline == nanoseconds::max()
                ? nanoseconds::max()
                : std::max(request.deadline - waiter.now(), nanoseconds::zero());
        return reserve_at(request, timeout, std::nullopt, round_trip);
      } catch (const RedisConnectionLost& lost) {
        // The reply was lost, not the time: the connection is made again and the request sent
        // once more. The first may have been booked, so the key may pay twice for this one
        // request: fewer grants, never more.
        if (sent_again || round_trip.passed()) throw;
        notify_(std::string(lost.what()) + "; sending the request again");
      }
    }
  } catch (const RedisInterrupted& interrupted) {
    Reservation reservation;
    reservation.signal = interrupted.signal;
    return reservation;
  } catch (const RedisTooLate&) {
    return {};
  }
}

Reservation RedisBackend::reserve_at(const PermitRequest& request, nanoseconds timeout,
                                     std::optional<std::int64_t> now_micros,
                                     io::Waiter* stop_waiter) {
  RedisDeadline round_trip = operation_deadline(stop_waiter);
  return reserve_at(request, timeout, now_micros, round_trip);
}

Reservation RedisBackend::reserve_at(const PermitRequest& request, nanoseconds timeout,
                                     std::optional<std::int64_t> now_micros,
                                     RedisDeadline& deadline) {
  validate(request.params);
  validate_permits(request.permits);
  const BucketParams& params = request.params;
  std::vector<std::string> arguments{request.apply_params ? "reserve" : "reserve_keeping",
                                     now_argument(now_micros),
                                     std::to_string(request.permits),
                                     std::to_string(timeout.count()),
                                     request_texts(request),
                                     shape_text(params.shape),
                                     params.pay_first ? "1" : "0",
                                     number_text(params.permits_per_second)};
  // Only the shape's own: each argument costs the server.
  if (params.shape == BucketShape::bursty) {
    arguments.push_back(number_text(params.max_burst_seconds));
  } else {
    arguments.push_back(std::to_string(params.warmup.count()));
    arguments.push_back(number_text(params.cold_factor));
  }
  for (const QuotaParams& quota : request.quotas) {
    arguments.push_back(std::to_string(quota.limit));
    arguments.push_back(std::to_string(slot_micros(quota)));
  }
  // Last, odd one out after the quotas' pairs: only with the parameters the request applies (the
  // script keeps it only with those, and the common call of a pipe, keeping the key's, need not
  // send it).
  if (request.apply_params && !request.notation.empty()) arguments.push_back(request.notation);
  const RedisValue reply = run_script(request.key, std::move(arguments), deadline);
  // When the key holds the request's rate and schedule and nothing was discarded, the wait alone
  // if granted, else {0, wait}; else {granted, wait, replaced, problem, key's timetable, key's
  // rate}, and when replaced the replaced parameters (7 fields, as status gives them), timetable
  // and quotas.
  constexpr std::size_t kAsRequestedFields = 2;
  constexpr std::size_t kKeptFields = 6;
  constexpr std::size_t kReplacedFields = kKeptFields + 7 + 2;
  Reservation reservation{.granted = true,
                          .wait = {},
                          .signal = 0,
                          .replaced_params = {},
                          .replaced_timetable = {},
                          .key_timetable = request.schedule.timetable,
                          .key_permits_per_second = params.permits_per_second};
  if (reply.type == RedisValue::Type::string) {
    if (!read_wait(reply.text, reservation)) unexpected_reply(reply);
    return reservation;
  }
  if (reply.type != RedisValue::Type::array) unexpected_reply(reply);
  const std::vector<RedisValue>& fields = reply.elements;
  if (fields.size() != kAsRequestedFields && fields.size() != kKeptFields &&
      fields.size() != kReplacedFields)
    unexpected_reply(reply);
  const RedisValue& granted = fields[0];
  const RedisValue& wait = fields[1];
  if (granted.type != RedisValue::Type::integer || (granted.integer != 0 && granted.integer != 1) ||
      !is_text(wait))
    unexpected_reply(reply);
  reservation.granted = granted.integer == 1;
  if (!read_wait(wait.text, reservation)) unexpected_reply(reply);
  if (fields.size() == kAsRequestedFields) return reservation;
  const RedisValue& replaced = fields[2];
  const RedisValue& problem = fields[3];
  const RedisValue& key_timetable = fields[4];
  // Not a rate: 0, refused below.
  const double key_rate =
      is_text(fields[5]) ? parse_number<double>(fields[5].text).value_or(0.0) : 0.0;
  const bool replaced_follows = fields.size() == kReplacedFields;
  if (replaced.type != RedisValue::Type::integer ||
      replaced.integer != (replaced_follows ? 1 : 0) || !is_text(problem) ||
      !is_text(key_timetable) || !(key_rate > 0.0))
    unexpected_reply(reply);
  if (!problem.text.empty())
    notify_(
        fmt::format("key '{}': {} in Redis; starting a fresh bucket", request.key, problem.text));
  reservation.key_timetable = key_timetable.text;
  reservation.key_permits_per_second = key_rate;
  if (replaced_follows) {
    const std::vector<RedisValue> replaced_params(fields.begin() + kKeptFields,
                                                  fields.begin() + kReplacedFields - 2);
    const RedisValue& replaced_timetable = fields[kReplacedFields - 2];
    const RedisValue& replaced_quotas = fields[kReplacedFields - 1];
    const auto quotas =
        is_text(replaced_quotas) ? parsed_quota_specs(replaced_quotas.text) : std::nullopt;
    if (!is_text(replaced_timetable) || !quotas) unexpected_reply(reply);
    reservation.replaced_params = parse_params(replaced_params, reply);
    reservation.replaced_timetable = replaced_timetable.text;
    reservation.replaced_quotas = *quotas;
  }
  return reservation;
}

BucketParams RedisBackend::parse_params(const std::vector<RedisValue>& fields,
                                        const RedisValue& reply) const {
  if (fields.size() < 7 || !std::all_of(fields.begin(), fields.begin() + 7, is_text))
    unexpected_reply(reply);
  const auto rate = parse_number<double>(fields[1].text);
  const auto burst = parse_number<double>(fields[2].text);
  const auto warmup = parse_number<std::int64_t>(fields[3].text);
  const auto cold = parse_number<double>(fields[4].text);
  if (!rate || !burst || !warmup || !cold) unexpected_reply(reply);
  return {.shape = fields[0].text == "warming_up" ? BucketShape::warming_up : BucketShape::bursty,
          .permits_per_second = *rate,
          .max_burst_seconds = *burst,
          .warmup = nanoseconds(*warmup),
          .cold_factor = *cold,
          .start_full = fields[5].text == "1",
          .pay_first = fields[6].text == "1"};
}

std::optional<BucketStatus> RedisBackend::status_at(const std::string& key,
                                                    std::optional<std::int64_t> now_micros) {
  RedisDeadline round_trip = operation_deadline();
  const RedisValue reply = run_script(key, {"status", now_argument(now_micros)}, round_trip);
  if (reply.type == RedisValue::Type::nil) return std::nullopt;
  if (reply.type != RedisValue::Type::array ||
      !std::all_of(reply.elements.begin(), reply.elements.end(), is_text))
    unexpected_reply(reply);
  const auto& fields = reply.elements;
  BucketStatus status;
  status.key = key;
  if (fields.size() == 2 && fields[0].text == "unusable") {
    status.problem = fields[1].text;
    return status;
  }
  // The bucket's fields, its notation last; then each quota's limit, period, used and the wait for
  // one more unit.
  constexpr std::size_t kBucketFields = 12;
  constexpr std::size_t kQuotaFields = 4;
  if (fields.size() < kBucketFields || (fields.size() - kBucketFields) % kQuotaFields != 0)
    unexpected_reply(reply);
  for (std::size_t i = kBucketFields; i < fields.size(); i += kQuotaFields) {
    const auto limit = parse_number<std::int64_t>(fields[i].text);
    const auto period = parse_number<std::int64_t>(fields[i + 1].text);
    const auto used = parse_number<std::int64_t>(fields[i + 2].text);
    const auto next_free_in = parse_number<std::int64_t>(fields[i + 3].text);
    if (!limit || !period || !used || !next_free_in) unexpected_reply(reply);
    status.quotas.push_back({.params = {.limit = *limit, .period = nanoseconds(*period)},
                             .used = *used,
                             .next_free_in = nanoseconds(*next_free_in)});
  }
  status.params = parse_params(fields, reply);
  const auto stored = parse_number<double>(fields[7].text);
  const auto next_free_in = parse_number<std::int64_t>(fields[8].text);
  const auto entry_until = parse_number<std::int64_t>(fields[10].text);
  if (!stored || !next_free_in || !entry_until) unexpected_reply(reply);
  status.stored_permits = *stored;
  status.next_free_in = std::chrono::nanoseconds(*next_free_in);
  status.schedule = {.timetable = fields[9].text, .entry_until = *entry_until};
  status.notation = fields[11].text;
  return status;
}

std::vector<BucketStatus> RedisBackend::status(const std::optional<std::string>& key) {
  std::vector<std::string> keys;
  if (key) {
    keys.push_back(*key);
  } else {
    // A Cluster's masters each hold their own slots' keys; the listing is one operation, then
    // each key's status another.
    RedisDeadline listing = operation_deadline();
    topology_.for_each_master(listing, [&](RedisConnection& master) {
      std::string cursor = "0";
      do {
        const RedisValue reply = master.command(
            {"SCAN", cursor, "MATCH", std::string(kKeyPrefix) + "*" + std::string(kKeySuffix),
             "COUNT", "1000"},
            listing);
        if (reply.type != RedisValue::Type::array || reply.elements.size() != 2 ||
            !is_text(reply.elements[0]) || reply.elements[1].type != RedisValue::Type::array)
          unexpected_reply(reply);
        cursor = reply.elements[0].text;
        for (const RedisValue& name : reply.elements[1].elements) {
          const std::string_view text = name.text;
          keys.emplace_back(
              text.substr(kKeyPrefix.size(), text.size() - kKeyPrefix.size() - kKeySuffix.size()));
        }
      } while (cursor != "0");
    });
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  std::vector<BucketStatus> buckets;
  for (const std::string& name : keys) {
    if (auto bucket = status_at(name, std::nullopt)) buckets.push_back(std::move(*bucket));
  }
  return buckets;
}

bool RedisBackend::reset(const std::string& key) {
  RedisDeadline round_trip = operation_deadline();
  const std::string bucket_key = redis_key(key);
  const RedisValue reply = command(bucket_key, {"DEL", bucket_key}, round_trip);
  if (reply.type != RedisValue::Type::integer) unexpected_reply(reply);
  return reply.integer > 0;
}

bool RedisBackend::set_rate(const std::string& key, double permits_per_second,
                            const KeySchedule& schedule) {
  return set_rate_at(key, permits_per_second, schedule, std::nullopt);
}

void RedisBackend::ping(const std::string& key, io::Waiter& waiter) {
  RedisDeadline round_trip = operation_deadline(&waiter);
  const std::string bucket_key = redis_key(key);
  try {
    connect(bucket_key, round_trip);
    // A server that accepts connections may still be loading its data (-LOADING).
    const RedisValue reply = command(bucket_key, {"PING"}, round_trip);
    if (reply.type != RedisValue::Type::status || reply.text != "PONG") unexpected_reply(reply);
  } catch (const RedisInterrupted&) {
    throw BackendUnavailable("Redis at " + shown_url() + ": not asked to the end");
  }
}

bool RedisBackend::give_back(const std::string& key, std::int64_t permits,
                             const std::optional<BookingSpan>& booked) {
  return give_back_at(key, permits, booked, std::nullopt);
}

bool RedisBackend::give_back_at(const std::string& key, std::int64_t permits,
                                const std::optional<BookingSpan>& booked,
                                std::optional<std::int64_t> now_micros) {
  validate_permits(permits);
  RedisDeadline round_trip = operation_deadline();
  std::vector<std::string> arguments{"give_back", now_argument(now_micros),
                                     std::to_string(permits)};
  if (booked) {
    arguments.push_back(std::to_string(booked->from));
    arguments.push_back(std::to_string(booked->until));
  }
  const RedisValue reply = run_script(key, std::move(arguments), round_trip);
  if (reply.type == RedisValue::Type::nil) return false;
  if (reply.type != RedisValue::Type::integer || (reply.integer != 0 && reply.integer != 1))
    unexpected_reply(reply);
  return reply.integer == 1;
}

bool RedisBackend::set_rate_at(const std::string& key, double permits_per_second,
                               const KeySchedule& schedule,
                               std::optional<std::int64_t> now_micros) {
  BucketParams checked;
  checked.permits_per_second = permits_per_second;
  validate(checked);
  RedisDeadline round_trip = operation_deadline();
  const RedisValue reply =
      run_script(key,
                 {"set_rate", now_argument(now_micros), number_text(permits_per_second),
                  schedule.timetable, std::to_string(schedule.entry_until)},
                 round_trip);
  if (reply.type == RedisValue::Type::nil) return false;
  if (reply.type != RedisValue::Type::integer || reply.integer != 1) unexpected_reply(reply);
  return true;
}

}  // namespace ratelimit::backends
