#include "format/parse_quantities.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "format/prefixes.hpp"
#include "ratelimit/quota.hpp"

namespace ratelimit::format {
namespace {

using namespace std::string_view_literals;

// The prefixes read: those written, IEC first so that "Ki" is not read as "K" followed by "i",
// and "K" for kilo as people also write it.
constexpr Prefix kPrefixes[] = {
    kBinaryPrefixes[1], kBinaryPrefixes[2], kBinaryPrefixes[3], kBinaryPrefixes[4], kSiPrefixes[1],
    {"K"sv, 1e3},       kSiPrefixes[2],     kSiPrefixes[3],     kSiPrefixes[4],
};

struct TimeUnit {
  std::string_view symbol;
  double seconds;
};

// The short symbols and the words people write after a slash ("10MB/sec", "100/min").
constexpr TimeUnit kTimeUnits[] = {
    {"ns"sv, 1e-9},      {"us"sv, 1e-6},   {"ms"sv, 1e-3},     {"s"sv, 1.0},
    {"sec"sv, 1.0},      {"secs"sv, 1.0},  {"second"sv, 1.0},  {"seconds"sv, 1.0},
    {"m"sv, 60.0},       {"min"sv, 60.0},  {"mins"sv, 60.0},   {"minute"sv, 60.0},
    {"minutes"sv, 60.0}, {"h"sv, 3600.0},  {"hr"sv, 3600.0},   {"hour"sv, 3600.0},
    {"hours"sv, 3600.0}, {"d"sv, 86400.0}, {"day"sv, 86400.0}, {"days"sv, 86400.0},
};

constexpr auto kKnownUnits =
    "(use k, M, G, T = 1000^n or Ki, Mi, Gi, Ti = 1024^n; B or bit; /s, /m, /h, /d)"sv;

[[noreturn]] void reject(std::string_view kind, std::string_view text, std::string_view why) {
  throw UsageError("invalid " + std::string(kind) + " '" + std::string(text) +
                   "': " + std::string(why));
}

// Splits a leading decimal number (fractions and exponents allowed) off `rest`.
double take_number(std::string_view& rest, std::string_view kind, std::string_view text) {
  double value = 0.0;
  const auto [end, error] =
      std::from_chars(rest.data(), rest.data() + rest.size(), value, std::chars_format::general);
  if (error == std::errc::result_out_of_range) {
    // from_chars leaves the value alone: strtod tells an overflow (HUGE_VAL) from an underflow.
    const bool overflow = std::abs(std::strtod(std::string(rest).c_str(), nullptr)) > 1.0;
    reject(kind, text, overflow ? "too large" : "too small");
  }
  if (error != std::errc() || !std::isfinite(value)) reject(kind, text, "expected a number");
  rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  if (value < 0.0) reject(kind, text, "must not be negative");
  return value;
}

double take_prefix(std::string_view& rest, bool& binary) {
  for (const Prefix& prefix : kPrefixes) {
    if (rest.starts_with(prefix.symbol)) {
      rest.remove_prefix(prefix.symbol.size());
      binary = prefix.symbol.ends_with('i');
      return prefix.factor;
    }
  }
  return 1.0;
}

// What follows the prefix: a data unit, possibly with "ps" (per second) fused to it, as in
// "8Mbps" and "5MiBps". A lone lowercase "b" is refused: people mean bits and bytes by it alike.
struct DataSuffix {
  DataUnit unit = DataUnit::unspecified;
  bool per_second = false;
};

DataSuffix take_data_unit(std::string_view& rest, std::string_view kind, std::string_view text) {
  constexpr std::pair<std::string_view, DataSuffix> kSuffixes[] = {
      {"bits"sv, {DataUnit::bits, false}},   {"bit"sv, {DataUnit::bits, false}},
      {"bytes"sv, {DataUnit::bytes, false}}, {"byte"sv, {DataUnit::bytes, false}},
      {"bps"sv, {DataUnit::bits, true}},     {"Bps"sv, {DataUnit::bytes, true}},
      {"B"sv, {DataUnit::bytes, false}},
  };
  for (const auto& [symbol, suffix] : kSuffixes) {
    if (rest.starts_with(symbol)) {
      rest.remove_prefix(symbol.size());
      return suffix;
    }
  }
  if (rest.starts_with('b') && (rest.size() == 1 || rest[1] == '/')) {
    const std::size_t at = text.size() - rest.size();
    const std::string before(text.substr(0, at));
    const std::string after(text.substr(at + 1));
    reject(kind, text,
           fmt::format("'b' could mean bytes or bits: write {}B{} for bytes or {}bit{} for bits",
                       before, after, before, after));
  }
  return {};
}

// Seconds in a duration written with its unit, e.g. "15s" or "500ms" (the number is optional
// when `number_optional`, as in the period of "2/m").
double duration_seconds(std::string_view rest, bool number_optional, std::string_view kind,
                        std::string_view text) {
  double count = 1.0;
  if (!number_optional || rest.empty() || !std::isalpha(static_cast<unsigned char>(rest[0])))
    count = take_number(rest, kind, text);
  if (rest.empty()) {
    if (number_optional) reject(kind, text, "expected a period such as /s, /m or /15s");
    return count;  // a bare number of seconds
  }
  for (const TimeUnit& unit : kTimeUnits) {
    if (rest == unit.symbol) return count * unit.seconds;
  }
  reject(kind, text, "unknown time unit '" + std::string(rest) + "' (use ns, us, ms, s, m, h, d)");
}

// A number with its prefix and data unit: the part of a rate before the period, or a size.
Amount take_amount(std::string_view& rest, std::string_view kind, std::string_view text,
                   bool& per_second) {
  Amount amount;
  amount.units = take_number(rest, kind, text);
  amount.units *= take_prefix(rest, amount.binary_prefix);
  const DataSuffix suffix = take_data_unit(rest, kind, text);
  amount.unit = suffix.unit;
  per_second = suffix.per_second;
  if (amount.unit == DataUnit::bits) amount.units /= 8.0;
  return amount;
}

// "Mon-08:00 1M 18:00 10M": a timetable whose times and rates are apart, which reads as no rate.
// What was meant, with the commas; a sample entry if the words do not pair up.
std::string timetable_hint(std::string_view text) {
  std::vector<std::string_view> words;
  constexpr std::string_view kSeparators = " \t;";
  for (std::size_t at = 0; (at = text.find_first_not_of(kSeparators, at)) != text.npos;) {
    const std::size_t end = std::min(text.find_first_of(kSeparators, at), text.size());
    words.push_back(text.substr(at, end - at));
    at = end;
  }
  std::string meant;
  for (std::size_t i = 0; i + 1 < words.size(); i += 2) {
    if (words[i].find(':') == std::string_view::npos) return {};
    meant += fmt::format("{}{},{}", meant.empty() ? "" : " ", words[i], words[i + 1]);
  }
  if (words.size() % 2 != 0) return {};
  return meant;
}

// An unknown unit right after the number: what was likely meant, e.g. "10m" as pv reads it (10M)
// or as a period (10/m); empty if nothing is likely.
std::string unit_hint(std::string_view text, std::string_view unit) {
  const std::string_view number = text.substr(0, text.size() - unit.size());
  std::vector<std::string> meant;
  for (const Prefix& prefix : kPrefixes) {
    if (unit.size() == 1 && prefix.symbol.size() == 1 &&
        std::toupper(static_cast<unsigned char>(unit[0])) == prefix.symbol[0] &&
        unit != prefix.symbol)
      meant.push_back(fmt::format("{}{}", number, prefix.symbol));
  }
  // "10mb/s": a prefix in the wrong case before a data unit ("b" is bytes or bits).
  const std::size_t slash = std::min(unit.find('/'), unit.size());
  const std::string_view data = unit.substr(1, slash - std::min<std::size_t>(slash, 1));
  const std::string_view period = unit.substr(slash);
  constexpr std::string_view kDataUnits[] = {"B", "bit", "bits", "byte", "bytes", "bps", "Bps"};
  for (const Prefix& prefix : kPrefixes) {
    if (data.empty() || prefix.symbol.size() != 1 || unit[0] == prefix.symbol[0] ||
        std::toupper(static_cast<unsigned char>(unit[0])) != prefix.symbol[0])
      continue;
    if (data == "b") {
      meant.push_back(fmt::format("{}{}B{}", number, prefix.symbol, period));
      meant.push_back(fmt::format("{}{}bit{}", number, prefix.symbol, period));
    } else if (std::find(std::begin(kDataUnits), std::end(kDataUnits), data) !=
               std::end(kDataUnits)) {
      meant.push_back(fmt::format("{}{}{}{}", number, prefix.symbol, data, period));
    }
  }
  if (std::any_of(std::begin(kTimeUnits), std::end(kTimeUnits),
                  [unit](const TimeUnit& time) { return time.symbol == unit; }))
    meant.push_back(fmt::format("{}/{}", number, unit));
  if (meant.empty()) return {};
  return fmt::format("did you mean {}?", fmt::join(meant, " or "));
}

}  // namespace

Rate parse_rate(std::string_view text) {
  constexpr auto kind = "rate"sv;
  if (text.size() == 3 && std::equal(text.begin(), text.end(), "off", [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == b;
      }))
    return Rate{std::numeric_limits<double>::infinity(), DataUnit::unspecified};
  if (text.find(':') != std::string_view::npos) {
    const std::string meant = timetable_hint(text);
    reject(kind, text,
           meant.empty() ? "a timetable's entries are [DAY-]HH:MM,RATE, e.g. 'Mon-08:00,1M'"
                         : fmt::format("a timetable's entries are [DAY-]HH:MM,RATE: did you mean "
                                       "'{}'?",
                                       meant));
  }
  // "10 MB/s" as one word: the same without the spaces, if that is a rate.
  if (text.find_first_of(" \t") != std::string_view::npos) {
    std::string joined(text);
    std::erase_if(joined, [](char c) { return c == ' ' || c == '\t'; });
    try {
      parse_rate(joined);
    } catch (const UsageError&) {
      reject(kind, text, "a rate has no spaces");
    }
    reject(kind, text, fmt::format("a rate has no spaces: did you mean {}?", joined));
  }
  std::string_view rest = text;
  bool per_second = false;
  const Amount amount = take_amount(rest, kind, text, per_second);
  double period_seconds = 1.0;
  double written_period = per_second ? 1.0 : 0.0;
  if (!per_second && rest.starts_with('/')) {
    rest.remove_prefix(1);
    period_seconds = duration_seconds(rest, true, kind, text);
    written_period = period_seconds;
  } else if (!rest.empty()) {
    const std::string meant = unit_hint(text, rest);
    if (meant.empty()) reject(kind, text, fmt::format("unknown unit '{}' {}", rest, kKnownUnits));
    reject(kind, text, fmt::format("unknown unit '{}': {}", rest, meant));
  }
  if (!(period_seconds > 0.0)) reject(kind, text, "the period must be longer than zero");
  const double per_second_value = amount.units / period_seconds;
  if (!(per_second_value > 0.0)) reject(kind, text, "must be more than zero");
  if (!std::isfinite(per_second_value)) reject(kind, text, "too large");
  return Rate{per_second_value, amount.unit, amount.binary_prefix, written_period};
}

Notation notation_of(const Rate& rate, Counted counted) {
  return {.counted = counted,
          .binary_prefix = rate.binary_prefix,
          .bits = rate.unit == DataUnit::bits,
          .period_seconds = rate.period_seconds};
}

QuotaAmount parse_quota(std::string_view text) {
  constexpr auto kind = "quota"sv;
  std::string_view rest = text;
  bool per_second = false;
  const Amount amount = take_amount(rest, kind, text, per_second);
  double period_seconds = 1.0;
  if (!per_second) {
    if (!rest.starts_with('/'))
      reject(kind, text,
             rest.empty() ? "expected a period, e.g. 5000/h or 50GB/d"
                          : fmt::format("unknown unit '{}' {}", rest, kKnownUnits));
    rest.remove_prefix(1);
    period_seconds = duration_seconds(rest, true, kind, text);
  } else if (!rest.empty()) {
    reject(kind, text, fmt::format("unknown unit '{}' {}", rest, kKnownUnits));
  }
  if (!(amount.units >= 1.0) || amount.units != std::floor(amount.units))
    reject(kind, text, "the amount must be a whole number of units, at least 1");
  if (amount.units > static_cast<double>(kLargestExactCount))
    reject(kind, text, fmt::format("the amount must be at most {} (2^53 - 1)", kLargestExactCount));
  if (!(period_seconds * 1e6 >= 1.0) || period_seconds > 3653 * 86400.0)
    reject(kind, text, "the period must be from 1us to 10 years");
  return QuotaAmount{amount.units, std::chrono::nanoseconds(std::llround(period_seconds * 1e9)),
                     amount.unit};
}

Amount parse_size(std::string_view text) {
  constexpr auto kind = "size"sv;
  std::string_view rest = text;
  bool per_second = false;
  const Amount amount = take_amount(rest, kind, text, per_second);
  if (per_second) reject(kind, text, "a size is not per second (drop the 'ps')");
  if (!rest.empty())
    reject(kind, text,
           fmt::format("unknown unit '{}' (use k, M, G, T = 1000^n or Ki, Mi, Gi, Ti = 1024^n; "
                       "B or bit)",
                       rest));
  if (!std::isfinite(amount.units)) reject(kind, text, "too large");
  return amount;
}

bool ends_in_time_unit(std::string_view text) {
  const std::size_t letters = text.find_last_not_of("abcdefghijklmnopqrstuvwxyz") + 1;
  const std::string_view suffix = text.substr(std::min(letters, text.size()));
  return std::any_of(std::begin(kTimeUnits), std::end(kTimeUnits),
                     [suffix](const TimeUnit& unit) { return unit.symbol == suffix; });
}

std::chrono::nanoseconds parse_duration(std::string_view text) {
  constexpr auto kind = "duration"sv;
  const double seconds = duration_seconds(text, false, kind, text);
  // Beyond ~292 years nanoseconds overflow; no user means that.
  if (!(seconds < 9.2e9)) reject(kind, text, "too long");
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
}

TimeOrAmount parse_time_or_amount(std::string_view text) {
  if (ends_in_time_unit(text)) return parse_duration(text);
  return parse_size(text);
}

}  // namespace ratelimit::format
