#include "stores/redis/redis_script_protocol.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <utility>

#include "errors.hpp"
#include "format/fields.hpp"
#include "stores/redis/redis_script.hpp"

namespace ratelimit::stores::redis {
namespace {

using std::chrono::nanoseconds;

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

std::string flag_text(bool flag) { return flag ? "1" : "0"; }

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
                     flag_text(params.start_full), flag_text(params.pay_first), quotas,
                     request.schedule.entry_until, request.schedule.timetable);
}

// The quotas in a text as quota_specs() writes them; nothing if it holds anything else.
std::optional<std::vector<QuotaParams>> parsed_quota_specs(std::string_view text) {
  std::vector<QuotaParams> quotas;
  while (!text.empty()) {
    const std::string_view spec = format::take_field(text, ' ');
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

// ARGV of `operation`, with room up to position `last`; filled in by position (at()).
std::vector<std::string> arguments_of(std::string operation, std::optional<std::int64_t> now_micros,
                                      std::size_t last) {
  std::vector<std::string> arguments(last);
  arguments[kArgOperation - 1] = std::move(operation);
  arguments[kArgTime - 1] = now_micros ? std::to_string(*now_micros) : std::string();
  return arguments;
}

// The argument at a script position (from 1).
std::string& at(std::vector<std::string>& arguments, std::size_t position) {
  return arguments[position - 1];
}

// Reads one reply: its fields by the script's positions, and every failure one line naming the
// operation and what was wrong.
class ReplyReader {
 public:
  ReplyReader(const Value& reply, std::string_view operation, std::string_view server)
      : reply_(reply), operation_(operation), server_(server) {}

  [[noreturn]] void malformed(std::string_view what) const {
    throw StoreUnavailable(fmt::format("{}: unexpected reply to the bucket script's {}: {}",
                                       server_, operation_, what));
  }
  // The reply's fields, which must be `count` of one of the counts given.
  const std::vector<Value>& fields(std::initializer_list<std::size_t> counts) const {
    if (reply_.type != Value::Type::array) malformed("not a table");
    if (std::find(counts.begin(), counts.end(), reply_.elements.size()) == counts.end())
      malformed(fmt::format("{} fields", reply_.elements.size()));
    return reply_.elements;
  }
  const Value& field(std::size_t position) const {
    if (reply_.type != Value::Type::array || position > reply_.elements.size())
      malformed(fmt::format("no field {}", position));
    return reply_.elements[position - 1];
  }
  const std::string& text(std::size_t position) const {
    const Value& value = field(position);
    if (!is_text(value)) malformed(fmt::format("field {} is not a text", position));
    return value.text;
  }
  template <typename Number>
  Number number(std::size_t position) const {
    const auto value = parse_number<Number>(text(position));
    if (!value) malformed(fmt::format("field {} is not a number", position));
    return *value;
  }
  std::int64_t integer(std::size_t position) const {
    const Value& value = field(position);
    if (value.type != Value::Type::integer)
      malformed(fmt::format("field {} is not an integer", position));
    return value.integer;
  }
  bool flag(std::size_t position) const {
    const std::int64_t value = integer(position);
    if (value != 0 && value != 1) malformed(fmt::format("field {} is not 0 or 1", position));
    return value == 1;
  }
  // Parameters from `first` on, as status gives them.
  BucketParams params(std::size_t first) const {
    const std::string& shape = text(first + kParamShape);
    if (shape != "bursty" && shape != "warming_up")
      malformed(fmt::format("field {} is no shape", first + kParamShape));
    return {.shape = shape == "warming_up" ? BucketShape::warming_up : BucketShape::bursty,
            .permits_per_second = number<double>(first + kParamRate),
            .max_burst_seconds = number<double>(first + kParamBurst),
            .warmup = nanoseconds(number<std::int64_t>(first + kParamWarmup)),
            .cold_factor = number<double>(first + kParamCold),
            .start_full = text(first + kParamStartFull) == "1",
            .pay_first = text(first + kParamPayFirst) == "1"};
  }
  // The wait of a reply, "WAIT" or, granted, "WAIT FROM UNTIL" (the booking's span follows in
  // the same text, which the server makes at a fraction of the cost of more fields), followed by
  // " quota" when a quota set it.
  void read_wait(std::string_view text, Reservation& reservation) const {
    if (const std::size_t backoff = text.find(kWaitBackoff); backoff != std::string_view::npos) {
      const auto paused = parse_number<std::int64_t>(text.substr(backoff + kWaitBackoff.size()));
      if (!paused || *paused < 0) malformed("the pause is not a number");
      reservation.backing_off = true;
      reservation.paused_for = nanoseconds(*paused);
      text = text.substr(0, backoff);
    }
    constexpr std::string_view kHeldByQuota = " quota";
    reservation.held_by_quota = text.ends_with(kHeldByQuota);
    if (reservation.held_by_quota) text.remove_suffix(kHeldByQuota.size());
    const std::size_t first = text.find(' ');
    const auto wait = parse_number<std::int64_t>(text.substr(0, first));
    if (!wait) malformed("the wait is not a number");
    reservation.wait = nanoseconds(*wait);
    if (first == std::string_view::npos) {
      if (reservation.granted) malformed("a grant without its span");
      return;
    }
    if (!reservation.granted) malformed("a refusal with a span");
    const std::string_view span = text.substr(first + 1);
    const std::size_t second = span.find(' ');
    const auto from = parse_number<std::int64_t>(span.substr(0, second));
    const auto until = second == std::string_view::npos
                           ? std::nullopt
                           : parse_number<std::int64_t>(span.substr(second + 1));
    if (!from || !until) malformed("the span is not two numbers");
    reservation.booked = {.from = *from, .until = *until};
  }

 private:
  const Value& reply_;
  std::string_view operation_;
  std::string_view server_;
};

}  // namespace

std::vector<std::string> encode_reserve(const PermitRequest& request, nanoseconds timeout,
                                        std::optional<std::int64_t> now_micros) {
  const BucketParams& params = request.params;
  const bool bursty = params.shape == BucketShape::bursty;
  const std::size_t first_quota = bursty ? kArgFirstQuotaBursty : kArgFirstQuotaWarmingUp;
  // Last, odd one out after the quotas' pairs, when the request has one (the script keeps it only
  // for a new key or with the parameters reserve applies: a pipe sends it on its first call
  // only).
  const bool with_notation = !request.notation.empty();
  std::vector<std::string> arguments =
      arguments_of(request.apply_params ? "reserve" : "reserve_keeping", now_micros,
                   first_quota - 1 + 2 * request.quotas.size() + (with_notation ? 1 : 0));
  at(arguments, kArgPermits) = std::to_string(request.permits);
  at(arguments, kArgTimeout) = std::to_string(timeout.count());
  if (request.refuse_quota_wait) at(arguments, kArgTimeout).append(kQuotaWaitRefused);
  at(arguments, kArgTexts) = request_texts(request);
  at(arguments, kArgShape) = shape_text(params.shape);
  at(arguments, kArgPayFirst) = flag_text(params.pay_first);
  at(arguments, kArgRate) = number_text(params.permits_per_second);
  // Only the shape's own: each argument costs the server.
  if (bursty) {
    at(arguments, kArgBurst) = number_text(params.max_burst_seconds);
  } else {
    at(arguments, kArgWarmup) = std::to_string(params.warmup.count());
    at(arguments, kArgCold) = number_text(params.cold_factor);
  }
  std::size_t position = first_quota;
  for (const QuotaParams& quota : request.quotas) {
    at(arguments, position++) = std::to_string(quota.limit);
    at(arguments, position++) = std::to_string(slot_micros(quota));
  }
  if (with_notation) at(arguments, position) = request.notation;
  return arguments;
}

std::vector<std::string> encode_reserve_all(const std::vector<PermitRequest>& requests,
                                            nanoseconds timeout,
                                            std::optional<std::int64_t> now_micros) {
  std::vector<std::string> arguments =
      arguments_of(std::string(kReserveAllOperation), now_micros, kAllArgTimeout);
  at(arguments, kAllArgTimeout) = std::to_string(timeout.count());
  if (requests.front().refuse_quota_wait) at(arguments, kAllArgTimeout).append(kQuotaWaitRefused);
  for (const PermitRequest& request : requests)
    add_to_batch(arguments, encode_reserve(request, timeout, now_micros));
  return arguments;
}

std::vector<std::string> encode_status(std::optional<std::int64_t> now_micros) {
  return arguments_of("status", now_micros, kArgTime);
}

std::vector<std::string> encode_throttle(const ThrottleRequest& request,
                                         std::optional<std::int64_t> now_micros) {
  std::vector<std::string> arguments =
      arguments_of(std::string(kThrottleOperation), now_micros, kArgRetryAfter);
  at(arguments, kArgSentBefore) = std::to_string(request.sent_before.count());
  at(arguments, kArgRetryAfter) = std::to_string(request.retry_after.count());
  return arguments;
}

std::vector<std::string> encode_give_back(std::int64_t permits,
                                          const std::optional<BookingSpan>& booked,
                                          std::optional<std::int64_t> now_micros) {
  std::vector<std::string> arguments =
      arguments_of("give_back", now_micros, booked ? kArgBookedUntil : kArgGivenBack);
  at(arguments, kArgGivenBack) = std::to_string(permits);
  if (booked) {
    at(arguments, kArgBookedFrom) = std::to_string(booked->from);
    at(arguments, kArgBookedUntil) = std::to_string(booked->until);
  }
  return arguments;
}

std::vector<std::string> script_call(const std::vector<std::string>& redis_keys,
                                     const std::vector<std::string>& arguments) {
  std::vector<std::string> call{"FCALL", std::string(kRedisBucketFunction)};
  call.push_back(std::to_string(redis_keys.size()));
  call.insert(call.end(), redis_keys.begin(), redis_keys.end());
  call.insert(call.end(), arguments.begin(), arguments.end());
  return call;
}

bool function_missing(const Value& reply) {
  return reply.type == Value::Type::error && reply.text.starts_with("ERR Function not found");
}

std::vector<std::string> library_load() {
  return {"FUNCTION", "LOAD", "REPLACE", std::string(kRedisBucketLibrary)};
}

bool may_send_again(const std::vector<std::string>& command) {
  if (command.size() < 3 || command[0] != "FCALL") return true;
  std::size_t key_count = 0;
  const std::string& count = command[2];
  if (std::from_chars(count.data(), count.data() + count.size(), key_count).ec != std::errc())
    return true;
  const std::size_t operation = 3 + key_count + kArgOperation - 1;
  if (operation >= command.size()) return true;
  return command[operation] != "give_back" && command[operation] != "set_rate";
}

std::vector<std::string> encode_set_rate(double permits_per_second, const KeySchedule& schedule,
                                         std::optional<std::int64_t> now_micros,
                                         const std::optional<KeySettings>& settings) {
  std::vector<std::string> arguments =
      arguments_of("set_rate", now_micros, settings ? kArgNewSettings : kArgNewEntryUntil);
  at(arguments, kArgNewRate) = number_text(permits_per_second);
  at(arguments, kArgNewTimetable) = schedule.timetable;
  at(arguments, kArgNewEntryUntil) = std::to_string(schedule.entry_until);
  if (settings) {
    PermitRequest wanted;
    wanted.params = settings->params;
    wanted.schedule = schedule;
    wanted.quotas = settings->quotas;
    at(arguments, kArgNewSettings) = request_texts(wanted);
  }
  return arguments;
}

DecodedReservation decode_reservation(const Value& reply, const PermitRequest& request,
                                      std::string_view server) {
  const ReplyReader read(reply, "reserve", server);
  DecodedReservation decoded;
  Reservation& reservation = decoded.reservation;
  reservation.granted = true;
  reservation.key_timetable = request.schedule.timetable;
  reservation.key_permits_per_second = request.params.permits_per_second;
  if (reply.type == Value::Type::string) {
    read.read_wait(reply.text, reservation);
    return decoded;
  }
  const std::size_t count = read.fields({kAsRequestedFields, kKeptFields, kReplacedFields}).size();
  reservation.granted = read.flag(kReplyGranted);
  read.read_wait(read.text(kReplyWait), reservation);
  if (count == kAsRequestedFields) return decoded;
  const bool settings_follow = count == kReplacedFields;
  const std::int64_t replaced = read.integer(kReplyReplaced);
  if (replaced < 0 || replaced > kReplyFollowed)
    read.malformed(fmt::format("field {} is not 0 to {}", kReplyReplaced, kReplyFollowed));
  if ((replaced != 0) != settings_follow)
    read.malformed(fmt::format("field {} disagrees with {} fields", kReplyReplaced, count));
  decoded.problem = read.text(kReplyProblem);
  reservation.key_timetable = read.text(kReplyKeyTimetable);
  reservation.key_permits_per_second = read.number<double>(kReplyKeyRate);
  if (!(reservation.key_permits_per_second > 0.0))
    read.malformed(fmt::format("field {} is no rate", kReplyKeyRate));
  if (settings_follow) {
    const BucketParams params = read.params(kReplyReplacedParams);
    const std::string& timetable = read.text(kReplyReplacedTimetable);
    const auto quotas = parsed_quota_specs(read.text(kReplyReplacedQuotas));
    if (!quotas) read.malformed(fmt::format("field {} is no quotas", kReplyReplacedQuotas));
    if (replaced == kReplyFollowedTold || replaced == kReplyFollowed) {
      reservation.followed =
          KeySettings{.params = params, .timetable = timetable, .quotas = *quotas};
      reservation.tell_followed = replaced == kReplyFollowedTold;
    } else {
      reservation.replaced_params = params;
      reservation.replaced_timetable = timetable;
      reservation.replaced_quotas = *quotas;
    }
  }
  return decoded;
}

DecodedKeysReservation decode_reservations(const Value& reply,
                                           const std::vector<PermitRequest>& requests,
                                           std::string_view server) {
  const ReplyReader read(reply, kReserveAllOperation, server);
  const std::size_t keys = requests.size();
  const std::size_t asked_fields = kAllFirstKeyReply - 1 + keys;
  const std::size_t count = read.fields({asked_fields, asked_fields + keys}).size();
  DecodedKeysReservation decoded;
  KeysReservation& reservation = decoded.reservation;
  Reservation& call = reservation.call;
  call.granted = read.flag(kAllGranted);
  if (call.granted != (count == asked_fields + keys))
    read.malformed(fmt::format("field {} disagrees with {} fields", kAllGranted, count));
  call.wait = nanoseconds(read.number<std::int64_t>(kAllWait));
  const std::int64_t held_by = read.integer(kAllHeldBy);
  if (held_by < 0 || held_by > static_cast<std::int64_t>(keys))
    read.malformed(fmt::format("field {} is not 0 to {}", kAllHeldBy, keys));
  if (held_by > 0) reservation.held_by = static_cast<std::size_t>(held_by - 1);
  for (std::size_t i = 0; i < keys; ++i) {
    DecodedReservation asked =
        decode_reservation(read.field(kAllFirstKeyReply + i), requests[i], server);
    Reservation& key = asked.reservation;
    key.granted = call.granted;
    if (call.granted) {
      const DecodedReservation booked =
          decode_reservation(read.field(kAllFirstKeyReply + keys + i), requests[i], server);
      if (!booked.reservation.granted)
        read.malformed(fmt::format("field {} is not granted", kAllFirstKeyReply + keys + i));
      key.booked = booked.reservation.booked;
    }
    call.paused_for = std::max(call.paused_for, key.paused_for);
    call.backing_off = call.backing_off || key.backing_off;
    reservation.keys.push_back(std::move(key));
    decoded.problems.push_back(std::move(asked.problem));
  }
  if (reservation.held_by)
    call.held_by_quota = reservation.keys[*reservation.held_by].held_by_quota;
  return decoded;
}

std::optional<BucketStatus> decode_status(const Value& reply, const std::string& key,
                                          std::string_view server) {
  const ReplyReader read(reply, "status", server);
  if (reply.type == Value::Type::nil) return std::nullopt;
  if (reply.type != Value::Type::array) read.malformed("not a table");
  const std::size_t count = reply.elements.size();
  BucketStatus status;
  status.key = key;
  if (count == kUnusableFields && read.text(1) == "unusable") {
    status.problem = read.text(2);
    return status;
  }
  if (count < kStatusFields || (count - kStatusFields) % kQuotaFields != 0)
    read.malformed(fmt::format("{} fields", count));
  status.params = read.params(kStatusParams);
  status.stored_permits = read.number<double>(kStatusStored);
  status.next_free_in = nanoseconds(read.number<std::int64_t>(kStatusNextFreeIn));
  status.schedule = {.timetable = read.text(kStatusTimetable),
                     .entry_until = read.number<std::int64_t>(kStatusEntryUntil)};
  status.notation = read.text(kStatusNotation);
  status.rate_in_force = status.params.permits_per_second;
  if (const std::string& backoff = read.text(kStatusBackoff); !backoff.empty()) {
    std::string_view rest = backoff;
    const auto next = [&rest] { return format::take_field(rest, ' '); };
    const auto rate_value = parse_number<double>(next());
    const auto paused_value = parse_number<std::int64_t>(next());
    const auto throttles_value = parse_number<std::int64_t>(next());
    const auto last_ago_value = parse_number<std::int64_t>(next());
    if (!rate_value || !paused_value || !throttles_value || !last_ago_value || !rest.empty())
      read.malformed(fmt::format("field {} is no back-off", kStatusBackoff));
    status.rate_in_force = *rate_value;
    status.paused_for = nanoseconds(*paused_value);
    status.throttles = *throttles_value;
    status.last_throttle_ago = nanoseconds(*last_ago_value);
  }
  for (std::size_t quota = kStatusFields + 1; quota <= count; quota += kQuotaFields) {
    status.quotas.push_back(
        {.params = {.limit = read.number<std::int64_t>(quota + kQuotaLimit),
                    .period = nanoseconds(read.number<std::int64_t>(quota + kQuotaPeriod))},
         .used = read.number<std::int64_t>(quota + kQuotaUsed),
         .next_free_in = nanoseconds(read.number<std::int64_t>(quota + kQuotaNextFreeIn))});
  }
  return status;
}

std::optional<ThrottleResult> decode_throttle(const Value& reply, std::string_view server) {
  if (reply.type == Value::Type::nil) return std::nullopt;
  const ReplyReader read(reply, kThrottleOperation, server);
  read.fields({kThrottleFields});
  ThrottleResult result;
  result.outcome = {.new_event = read.flag(kThrottleNewEvent),
                    .pause_extended = read.flag(kThrottlePauseExtended)};
  result.paused_for = nanoseconds(read.number<std::int64_t>(kThrottlePausedFor));
  result.rate_in_force = read.number<double>(kThrottleRateInForce);
  return result;
}

bool decode_give_back(const Value& reply, std::string_view server) {
  if (reply.type == Value::Type::nil) return false;
  if (reply.type != Value::Type::integer || (reply.integer != 0 && reply.integer != 1))
    ReplyReader(reply, "give_back", server).malformed("not 0 or 1");
  return reply.integer == 1;
}

bool decode_set_rate(const Value& reply, std::string_view server) {
  if (reply.type == Value::Type::nil) return false;
  if (reply.type != Value::Type::integer || reply.integer != 1)
    ReplyReader(reply, "set_rate", server).malformed("not 1");
  return true;
}

void add_to_batch(std::vector<std::string>& batch, std::span<const std::string> request) {
  batch.push_back(std::to_string(request.size()));
  batch.insert(batch.end(), request.begin(), request.end());
}

std::vector<Value> decode_batch(Value reply, std::size_t count, std::string_view server) {
  if (reply.type == Value::Type::error) return std::vector<Value>(count, reply);
  if (reply.type != Value::Type::array || reply.elements.size() != count)
    ReplyReader(reply, kBatchOperation, server)
        .malformed(reply.type == Value::Type::array
                       ? fmt::format("{} replies for {} requests", reply.elements.size(), count)
                       : std::string("not a table"));
  return std::move(reply.elements);
}

}  // namespace ratelimit::stores::redis
