#include "golden_vectors.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

namespace ratelimit::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

// Waits from here on are "forever": a store may saturate anywhere beyond (about 71 years).
constexpr std::int64_t kForeverMicros = std::int64_t{1} << 51;

class LineError : public std::runtime_error {
 public:
  LineError(const std::string& path, int line, const std::string& what)
      : std::runtime_error(path + ":" + std::to_string(line) + ": " + what) {}
};

std::int64_t parse_integer(const std::string& text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument("not an integer: '" + text + "'");
  return value;
}

double parse_number(const std::string& text) {
  // strtod, not stod: a denormal such as 4.9e-324 is a valid rate, not an error.
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw std::invalid_argument("not a number: '" + text + "'");
  return value;
}

nanoseconds micros_to_nanos(std::int64_t micros) {
  if (micros > std::numeric_limits<std::int64_t>::max() / 1000 || micros < 0)
    throw std::invalid_argument("time out of range: " + std::to_string(micros));
  return microseconds(micros);
}

nanoseconds parse_duration(const std::string& text) {
  if (text == "forever") return nanoseconds::max();
  return micros_to_nanos(parse_integer(text));
}

bool parse_yes_no(const std::string& text) {
  if (text == "yes") return true;
  if (text == "no") return false;
  throw std::invalid_argument("expected yes or no: '" + text + "'");
}

// "K" or "K..L": requests of a vector, counted from 1.
std::pair<int, int> parse_requests(const std::string& text) {
  const std::size_t dots = text.find("..");
  const std::int64_t first = parse_integer(text.substr(0, dots));
  const std::int64_t last =
      dots == std::string::npos ? first : parse_integer(text.substr(dots + 2));
  if (first < 1 || last < first || last > 1000)
    throw std::invalid_argument("expected requests K or K..L from 1: '" + text + "'");
  return {static_cast<int>(first), static_cast<int>(last)};
}

// NAME=VALUE fields after the first word; each NAME is taken out as it is used, so that what is
// left over is unknown.
std::map<std::string, std::string> fields_of(std::istringstream& words) {
  std::map<std::string, std::string> fields;
  std::string word;
  while (words >> word) {
    const auto equals = word.find('=');
    if (equals == std::string::npos || equals == 0)
      throw std::invalid_argument("expected NAME=VALUE: '" + word + "'");
    if (!fields.emplace(word.substr(0, equals), word.substr(equals + 1)).second)
      throw std::invalid_argument("field given twice: '" + word + "'");
  }
  return fields;
}

std::optional<std::string> take(std::map<std::string, std::string>& fields,
                                const std::string& name) {
  const auto found = fields.find(name);
  if (found == fields.end()) return std::nullopt;
  std::string value = found->second;
  fields.erase(found);
  return value;
}

std::string require(std::map<std::string, std::string>& fields, const std::string& name) {
  std::optional<std::string> value = take(fields, name);
  if (!value) throw std::invalid_argument("missing field " + name);
  return *value;
}

void reject_unknown(const std::map<std::string, std::string>& fields) {
  if (!fields.empty()) throw std::invalid_argument("unknown field " + fields.begin()->first);
}

// Comma-separated items, none empty.
std::vector<std::string> items_of(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (item.empty())
      throw std::invalid_argument("empty item in '" + text + "'");
    else
      items.push_back(item);
  if (items.empty() || text.ends_with(','))
    throw std::invalid_argument("empty list '" + text + "'");
  return items;
}

// LIMIT/PERIOD_US,...
std::vector<QuotaParams> parse_quotas(const std::string& text) {
  std::vector<QuotaParams> quotas;
  for (const std::string& item : items_of(text)) {
    const auto slash = item.find('/');
    if (slash == std::string::npos) throw std::invalid_argument("expected LIMIT/PERIOD: " + item);
    quotas.push_back({.limit = parse_integer(item.substr(0, slash)),
                      .period = micros_to_nanos(parse_integer(item.substr(slash + 1)))});
  }
  return quotas;
}

BucketParams parse_params(std::map<std::string, std::string>& fields) {
  BucketParams params;
  if (const auto shape = take(fields, "shape")) {
    if (*shape == "bursty") {
      params.shape = BucketShape::bursty;
    } else if (*shape == "warming_up") {
      params.shape = BucketShape::warming_up;
    } else {
      throw std::invalid_argument("unknown shape '" + *shape + "'");
    }
  }
  params.permits_per_second = parse_number(require(fields, "rate"));
  if (const auto burst = take(fields, "burst_s")) params.max_burst_seconds = parse_number(*burst);
  if (const auto warmup = take(fields, "warmup_us")) params.warmup = parse_duration(*warmup);
  if (const auto cold = take(fields, "cold_factor")) params.cold_factor = parse_number(*cold);
  if (const auto start_full = take(fields, "start_full"))
    params.start_full = parse_yes_no(*start_full);
  if (const auto pay_first = take(fields, "pay_first")) params.pay_first = parse_yes_no(*pay_first);
  return params;
}

GoldenStatus parse_status(std::map<std::string, std::string>& fields) {
  GoldenStatus status{.at = parse_duration(require(fields, "t")), .quotas = {}};
  const auto limits = take(fields, "limits");
  const auto used = take(fields, "used");
  const auto next_free = take(fields, "next_free");
  reject_unknown(fields);
  if (!limits && !used && !next_free) return status;
  if (!limits || !used || !next_free)
    throw std::invalid_argument("limits, used and next_free go together");
  const std::vector<std::string> limit_items = items_of(*limits), used_items = items_of(*used),
                                 next_free_items = items_of(*next_free);
  if (used_items.size() != limit_items.size() || next_free_items.size() != limit_items.size())
    throw std::invalid_argument("limits, used and next_free of different lengths");
  for (std::size_t i = 0; i < limit_items.size(); ++i)
    status.quotas.push_back({.limit = parse_integer(limit_items[i]),
                             .used = parse_integer(used_items[i]),
                             .next_free_in = micros_to_nanos(parse_integer(next_free_items[i]))});
  return status;
}

std::string status_text(const std::vector<GoldenQuotaStatus>& quotas) {
  if (quotas.empty()) return "";
  std::string limits, used, next_free;
  for (const GoldenQuotaStatus& quota : quotas) {
    if (!limits.empty()) {
      limits += ',';
      used += ',';
      next_free += ',';
    }
    limits += std::to_string(quota.limit);
    used += std::to_string(quota.used);
    next_free +=
        std::to_string(std::chrono::duration_cast<microseconds>(quota.next_free_in).count());
  }
  return " limits=" + limits + " used=" + used + " next_free=" + next_free;
}

// The status as compared: waits in whole microseconds.
std::vector<GoldenQuotaStatus> in_micros(std::vector<GoldenQuotaStatus> quotas) {
  for (GoldenQuotaStatus& quota : quotas)
    quota.next_free_in = std::chrono::duration_cast<microseconds>(quota.next_free_in);
  return quotas;
}

GoldenRequest parse_request(std::map<std::string, std::string>& fields,
                            const BucketParams& params) {
  GoldenRequest request;
  request.params = params;
  request.at = parse_duration(require(fields, "t"));
  if (const auto permits = take(fields, "permits")) request.permits = parse_integer(*permits);
  if (const auto timeout = take(fields, "timeout")) request.timeout = parse_duration(*timeout);
  if (const auto apply = take(fields, "apply")) request.apply_params = parse_yes_no(*apply);
  if (const auto timetable = take(fields, "timetable")) request.timetable = *timetable;
  if (const auto until = take(fields, "entry_until")) request.entry_until = parse_integer(*until);
  if (const auto replaced = take(fields, "replaced")) request.replaced = parse_yes_no(*replaced);
  if (const auto followed = take(fields, "followed")) request.followed = parse_yes_no(*followed);
  request.key_timetable = take(fields, "key_timetable");
  if (const auto granted = take(fields, "granted"); granted && *granted != "?")
    request.granted = parse_yes_no(*granted);
  if (const auto wait = take(fields, "wait"); wait && *wait != "?") {
    request.wait = *wait == "forever" ? microseconds::max() : microseconds(parse_integer(*wait));
  }
  reject_unknown(fields);
  return request;
}

std::string wait_text(nanoseconds wait) {
  const std::int64_t micros = std::chrono::duration_cast<microseconds>(wait).count();
  return micros >= kForeverMicros ? "forever" : std::to_string(micros);
}

bool wait_matches(microseconds expected, nanoseconds actual) {
  const std::int64_t micros = std::chrono::duration_cast<microseconds>(actual).count();
  if (expected == microseconds::max()) return micros >= kForeverMicros;
  return micros == expected.count();
}

// `line` with its answer fields as the store answered.
std::string answered_line(const std::string& line, const GoldenAnswer& answer) {
  std::istringstream words(line);
  std::string word;
  std::string out;
  while (words >> word) {
    if (word.starts_with("granted=") || word.starts_with("wait=") ||
        word.starts_with("replaced=") || word.starts_with("key_timetable=") ||
        word.starts_with("followed="))
      continue;
    out += word + " ";
  }
  return out + "granted=" + (answer.granted ? "yes" : "no") + " wait=" + wait_text(answer.wait) +
         " replaced=" + (answer.replaced ? "yes" : "no") +
         " key_timetable=" + answer.key_timetable + " followed=" + (answer.followed ? "yes" : "no");
}

// request_all's fields, its parts made of each declared key's parameters.
GoldenRequestAll parse_request_all(std::map<std::string, std::string>& fields,
                                   const std::vector<GoldenRequest>& declared) {
  if (declared.empty()) throw std::invalid_argument("request_all before any key line");
  GoldenRequestAll call;
  const auto held_by = take(fields, "held_by");
  if (held_by && *held_by != "?" && *held_by != "none" &&
      std::none_of(declared.begin(), declared.end(),
                   [&](const GoldenRequest& key) { return key.key == *held_by; }))
    throw std::invalid_argument("held_by names no key: " + *held_by);
  if (held_by && *held_by != "?") call.held_by = held_by;
  std::optional<std::vector<std::string>> named;
  if (const auto keys = take(fields, "keys")) named = items_of(*keys);
  const GoldenRequest common = parse_request(fields, BucketParams{});
  call.granted = common.granted;
  call.wait = common.wait;
  for (const GoldenRequest& key : declared) {
    if (named && std::find(named->begin(), named->end(), key.key) == named->end()) continue;
    GoldenRequest part = key;
    part.at = common.at;
    part.permits = common.permits;
    part.timeout = common.timeout;
    part.apply_params = common.apply_params;
    call.keys.push_back(std::move(part));
  }
  if (named && call.keys.size() != named->size())
    throw std::invalid_argument("keys names an undeclared key, or one twice");
  if (call.held_by && *call.held_by != "none" &&
      std::none_of(call.keys.begin(), call.keys.end(),
                   [&](const GoldenRequest& key) { return key.key == *call.held_by; }))
    throw std::invalid_argument("held_by names a key not asked: " + *call.held_by);
  return call;
}

std::string held_by_text(const std::vector<GoldenRequest>& keys,
                         const std::optional<std::size_t>& held_by) {
  return held_by ? keys[*held_by].key : "none";
}

}  // namespace

std::vector<GoldenVector> read_golden_vectors(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<GoldenVector> vectors;
  std::optional<GoldenVector> open;
  std::optional<BucketParams> params;
  std::vector<QuotaParams> quotas;
  std::vector<GoldenRequest> declared_keys;  // the vector's `key` lines
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    std::istringstream words(text);
    std::string word;
    if (!(words >> word) || word.starts_with('#')) continue;
    try {
      if (word == "vector") {
        if (open) throw std::invalid_argument("vector inside vector " + open->name);
        open = GoldenVector{};
        if (!(words >> open->name)) throw std::invalid_argument("vector without a name");
        params.reset();
        declared_keys.clear();
        continue;
      }
      if (!open) throw std::invalid_argument("'" + word + "' outside a vector");
      if (word == "end") {
        vectors.push_back(std::move(*open));
        open.reset();
        continue;
      }
      if (word == "key") {
        GoldenRequest key;
        if (!(words >> key.key) || key.key.find('=') != std::string::npos)
          throw std::invalid_argument("key without a name");
        std::map<std::string, std::string> fields = fields_of(words);
        key.params = parse_params(fields);
        if (const auto given = take(fields, "quotas")) key.quotas = parse_quotas(*given);
        reject_unknown(fields);
        declared_keys.push_back(std::move(key));
        continue;
      }
      std::map<std::string, std::string> fields = fields_of(words);
      GoldenStep step{.line = line,
                      .text = text,
                      .request = {},
                      .set_rate = {},
                      .give_back = {},
                      .status = {},
                      .throttle = {},
                      .request_all = {}};
      if (word == "params") {
        params = parse_params(fields);
        quotas.clear();
        if (const auto given = take(fields, "quotas")) quotas = parse_quotas(*given);
        reject_unknown(fields);
        continue;
      }
      if (word == "request_all") {
        step.request_all = parse_request_all(fields, declared_keys);
        open->steps.push_back(std::move(step));
        continue;
      }
      if (!params) throw std::invalid_argument("'" + word + "' before params");
      if (word == "request") {
        step.request = parse_request(fields, *params);
        step.request->quotas = quotas;
      } else if (word == "set_rate") {
        step.set_rate = GoldenSetRate{.at = parse_duration(require(fields, "t")),
                                      .rate = parse_number(require(fields, "rate")),
                                      .timetable = take(fields, "timetable").value_or(""),
                                      .entry_until = 0};
        if (const auto until = take(fields, "entry_until"))
          step.set_rate->entry_until = parse_integer(*until);
        reject_unknown(fields);
        params->permits_per_second = step.set_rate->rate;
      } else if (word == "status") {
        step.status = parse_status(fields);
      } else if (word == "give_back") {
        step.give_back = GoldenGiveBack{.at = parse_duration(require(fields, "t")),
                                        .permits = parse_integer(require(fields, "permits")),
                                        .booked = {},
                                        .moved = {}};
        if (const auto booked = take(fields, "booked"))
          step.give_back->booked = parse_requests(*booked);
        if (const auto moved = take(fields, "moved")) step.give_back->moved = parse_yes_no(*moved);
        reject_unknown(fields);
      } else if (word == "throttle") {
        step.throttle = GoldenThrottle{.at = parse_duration(require(fields, "t")),
                                       .sent_before = {},
                                       .retry_after = {},
                                       .new_event = {},
                                       .paused = {},
                                       .rate = {}};
        if (const auto sent = take(fields, "sent_before"))
          step.throttle->sent_before = parse_duration(*sent);
        if (const auto retry = take(fields, "retry_after"))
          step.throttle->retry_after = parse_duration(*retry);
        // '?': not expected yet (a vector being written).
        if (const auto new_event = take(fields, "new_event"); new_event && *new_event != "?")
          step.throttle->new_event = parse_yes_no(*new_event);
        if (const auto paused = take(fields, "paused"); paused && *paused != "?")
          step.throttle->paused = microseconds(parse_integer(*paused));
        if (const auto rate = take(fields, "rate"); rate && *rate != "?")
          step.throttle->rate = parse_number(*rate);
        reject_unknown(fields);
      } else {
        throw std::invalid_argument("unknown line '" + word + "'");
      }
      open->steps.push_back(std::move(step));
    } catch (const std::invalid_argument& error) {
      throw LineError(path, line, error.what());
    }
  }
  if (open) throw LineError(path, 0, "vector " + open->name + " has no end");
  return vectors;
}

GoldenAnswer golden_answer(const stores::Reservation& reservation) {
  return {.granted = reservation.granted,
          .wait = reservation.wait,
          .replaced = reservation.replaced_params.has_value(),
          .key_timetable = reservation.key_timetable,
          .followed = reservation.tell_followed,
          .booked = reservation.booked};
}

GoldenKeysAnswer golden_keys_answer(const stores::KeysReservation& reservation) {
  return {.granted = reservation.call.granted,
          .wait = reservation.call.wait,
          .held_by = reservation.held_by};
}

std::vector<GoldenQuotaStatus> golden_quotas(const std::vector<stores::QuotaStatus>& quotas) {
  std::vector<GoldenQuotaStatus> golden;
  for (const stores::QuotaStatus& quota : quotas)
    golden.push_back(
        {.limit = quota.params.limit, .used = quota.used, .next_free_in = quota.next_free_in});
  return golden;
}

std::vector<std::string> replay(const GoldenVector& vector, GoldenStore& store) {
  std::vector<std::string> mismatches;
  std::vector<stores::BookingSpan> spans;  // of each request so far
  for (const GoldenStep& step : vector.steps) {
    if (step.set_rate) {
      store.set_rate(*step.set_rate);
      continue;
    }
    if (step.give_back) {
      std::optional<stores::BookingSpan> booked;
      if (const auto requests = step.give_back->booked) {
        const auto [first, last] = *requests;
        if (last > static_cast<int>(spans.size())) {
          mismatches.push_back(vector.name + " line " + std::to_string(step.line) +
                               ": no request " + std::to_string(last) + " before");
          continue;
        }
        booked = stores::BookingSpan{.from = spans[first - 1].from, .until = spans[last - 1].until};
      }
      const bool moved = store.give_back(*step.give_back, booked);
      if (step.give_back->moved.value_or(moved) != moved)
        mismatches.push_back(vector.name + " line " + std::to_string(step.line) +
                             ": the store answers moved=" + (moved ? "yes" : "no"));
      continue;
    }
    if (step.throttle) {
      const GoldenThrottle& report = *step.throttle;
      const std::optional<stores::ThrottleResult> result = store.throttle(report);
      const auto paused = std::chrono::duration_cast<microseconds>(result ? result->paused_for
                                                                          : nanoseconds::zero());
      // The rate as the core computes it, to the last bits a double's arithmetic may differ in.
      const auto same_rate = [](double expected, double actual) {
        return std::abs(expected - actual) <= 1e-12 * std::abs(expected);
      };
      if (!result ||
          report.new_event.value_or(result->outcome.new_event) != result->outcome.new_event ||
          report.paused.value_or(paused) != paused ||
          !same_rate(report.rate.value_or(result->rate_in_force), result->rate_in_force))
        mismatches.push_back(vector.name + " line " + std::to_string(step.line) +
                             ": the store answers " +
                             (result ? fmt::format("new_event={} paused={} rate={:.17g}",
                                                   result->outcome.new_event ? "yes" : "no",
                                                   paused.count(), result->rate_in_force)
                                     : std::string("no bucket")));
      continue;
    }
    if (step.status) {
      const std::vector<GoldenQuotaStatus> shown = in_micros(store.status(step.status->at));
      if (shown != step.status->quotas)
        mismatches.push_back(
            vector.name + " line " + std::to_string(step.line) + ": the store shows\nstatus t=" +
            std::to_string(std::chrono::duration_cast<microseconds>(step.status->at).count()) +
            status_text(shown));
      continue;
    }
    if (step.request_all) {
      const GoldenRequestAll& call = *step.request_all;
      const GoldenKeysAnswer answer = store.request_all(call.keys);
      if (!(call.granted == answer.granted && call.wait && wait_matches(*call.wait, answer.wait) &&
            call.held_by.value_or(held_by_text(call.keys, answer.held_by)) ==
                held_by_text(call.keys, answer.held_by)))
        mismatches.push_back(vector.name + " line " + std::to_string(step.line) +
                             ": the store answers granted=" + (answer.granted ? "yes" : "no") +
                             " wait=" + wait_text(answer.wait) +
                             " held_by=" + held_by_text(call.keys, answer.held_by));
      continue;
    }
    const GoldenRequest& request = *step.request;
    const GoldenAnswer answer = store.request(request);
    spans.push_back(answer.booked);
    const bool same =
        request.granted == answer.granted && request.wait &&
        wait_matches(*request.wait, answer.wait) &&
        request.replaced.value_or(answer.replaced) == answer.replaced &&
        request.key_timetable.value_or(answer.key_timetable) == answer.key_timetable &&
        request.followed.value_or(answer.followed) == answer.followed;
    if (!same) {
      mismatches.push_back(vector.name + " line " + std::to_string(step.line) +
                           ": the store answers\n" + answered_line(step.text, answer));
    }
  }
  return mismatches;
}

}  // namespace ratelimit::testing
