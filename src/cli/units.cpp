#include "cli/units.hpp"

#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <utility>

namespace ratelimit::cli {
namespace {

using namespace std::string_view_literals;

struct Prefix {
  std::string_view symbol;
  double factor;
};

// Longest symbols first so that "Ki" is not read as "K" followed by "i".
constexpr Prefix kPrefixes[] = {
    {"Ki"sv, 1024.0}, {"Mi"sv, 1048576.0}, {"Gi"sv, 1073741824.0}, {"Ti"sv, 1099511627776.0},
    {"k"sv, 1e3},     {"K"sv, 1e3},        {"M"sv, 1e6},           {"G"sv, 1e9},
    {"T"sv, 1e12},
};

struct TimeUnit {
  std::string_view symbol;
  double seconds;
};

constexpr TimeUnit kTimeUnits[] = {
    {"ns"sv, 1e-9}, {"us"sv, 1e-6},  {"ms"sv, 1e-3},   {"s"sv, 1.0},
    {"m"sv, 60.0},  {"h"sv, 3600.0}, {"d"sv, 86400.0},
};

[[noreturn]] void reject(std::string_view kind, std::string_view text, std::string_view why) {
  throw UsageError("invalid " + std::string(kind) + " '" + std::string(text) +
                   "': " + std::string(why));
}

// Splits a leading decimal number (fractions and exponents allowed) off `rest`.
double take_number(std::string_view& rest, std::string_view kind, std::string_view text) {
  double value = 0.0;
  const auto [end, error] =
      std::from_chars(rest.data(), rest.data() + rest.size(), value, std::chars_format::general);
  if (error != std::errc() || !std::isfinite(value)) reject(kind, text, "expected a number");
  rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  if (value < 0.0) reject(kind, text, "must not be negative");
  return value;
}

double take_prefix(std::string_view& rest) {
  for (const Prefix& prefix : kPrefixes) {
    if (rest.starts_with(prefix.symbol)) {
      rest.remove_prefix(prefix.symbol.size());
      return prefix.factor;
    }
  }
  return 1.0;
}

DataUnit take_data_unit(std::string_view& rest) {
  for (auto [symbol, unit] : {std::pair{"bit"sv, DataUnit::bits}, std::pair{"b"sv, DataUnit::bits},
                              std::pair{"B"sv, DataUnit::bytes}}) {
    if (rest.starts_with(symbol)) {
      rest.remove_prefix(symbol.size());
      return unit;
    }
  }
  return DataUnit::unspecified;
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

}  // namespace

Rate parse_rate(std::string_view text) {
  constexpr auto kind = "rate"sv;
  std::string_view rest = text;
  double value = take_number(rest, kind, text) * take_prefix(rest);
  const DataUnit unit = take_data_unit(rest);
  if (unit == DataUnit::bits) value /= 8.0;
  double period_seconds = 1.0;
  if (rest.starts_with('/')) {
    rest.remove_prefix(1);
    period_seconds = duration_seconds(rest, true, kind, text);
  } else if (!rest.empty()) {
    reject(kind, text, "unknown unit '" + std::string(rest) + "'");
  }
  if (!(period_seconds > 0.0)) reject(kind, text, "the period must be longer than zero");
  const double per_second = value / period_seconds;
  if (!(per_second > 0.0)) reject(kind, text, "must be more than zero");
  if (!std::isfinite(per_second)) reject(kind, text, "too large");
  return Rate{per_second, unit};
}

double parse_size(std::string_view text) {
  constexpr auto kind = "size"sv;
  std::string_view rest = text;
  const double value = take_number(rest, kind, text) * take_prefix(rest);
  if (rest == "B"sv) rest.remove_prefix(1);
  if (!rest.empty()) reject(kind, text, "unknown unit '" + std::string(rest) + "'");
  if (!std::isfinite(value)) reject(kind, text, "too large");
  return value;
}

std::chrono::nanoseconds parse_duration(std::string_view text) {
  constexpr auto kind = "duration"sv;
  const double seconds = duration_seconds(text, false, kind, text);
  // Beyond ~292 years nanoseconds overflow; no user means that.
  if (!(seconds < 9.2e9)) reject(kind, text, "too long");
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
}

namespace {

// Parses all of `text` as a T, or nothing.
template <typename T>
std::optional<T> whole_text_as(const std::string& text) {
  T value{};
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

template <typename T>
CLI::Validator range_check(T low, T high, std::string_view what) {
  return CLI::Validator(
      [low, high, what](std::string& text) -> std::string {
        const std::optional<T> value = whole_text_as<T>(text);
        if (value && *value >= low && *value <= high) return {};
        return fmt::format("'{}' is not {} from {} to {}", text, what, low, high);
      },
      fmt::format("{}..{}", low, high));
}

}  // namespace

CLI::Validator whole_number_in(std::int64_t low, std::int64_t high) {
  return range_check(low, high, "a whole number");
}

CLI::Validator number_in(double low, double high) { return range_check(low, high, "a number"); }

}  // namespace ratelimit::cli
