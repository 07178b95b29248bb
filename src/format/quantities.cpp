#include "format/quantities.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <utility>

#include "format/fields.hpp"
#include "format/prefixes.hpp"

namespace ratelimit::format {
namespace {

using namespace std::string_view_literals;

struct Period {
  std::string_view symbol;
  double seconds;
};

constexpr Period kPeriods[] = {{"/s"sv, 1.0}, {"/m"sv, 60.0}, {"/h"sv, 3600.0}, {"/d"sv, 86400.0}};

bool is_data(const Notation& notation) { return notation.counted == Counted::bytes; }

// Units counted as shown: bits are eight to a byte.
double shown_units(double units, const Notation& notation) {
  return is_data(notation) && notation.bits ? units * 8.0 : units;
}

std::string_view data_symbol(const Notation& notation) { return notation.bits ? "bit"sv : "B"sv; }

// fmt's "1e+300", "1.00e+15" and "1e-05" as people write them and --rate reads them: "1e300",
// "1.00e15", "1e-5".
std::string plain_exponent(std::string text) {
  const std::size_t e = text.find('e');
  if (e == std::string::npos) return text;
  std::size_t digits = e + 1;
  if (text[digits] == '+')
    text.erase(digits, 1);
  else if (text[digits] == '-')
    ++digits;
  while (digits + 1 < text.size() && text[digits] == '0') text.erase(digits, 1);
  return text;
}

bool is_whole(double count) { return std::abs(count - std::round(count)) <= 1e-9 * count; }

// `count` written with a prefix (or none) and read back the same, within `relative_error`: "1G",
// "10Mi", "1.5k", "250", "123456789"; empty if no prefix writes it so in a few digits.
std::string exact_count(double count, double relative_error = 1e-9) {
  std::string best;
  const auto consider = [&](const Prefix& prefix) {
    const double scaled = count / prefix.factor;
    // Without a prefix a whole count is written in full ("123456789"), as people would.
    const bool plain = prefix.factor == 1.0 && is_whole(count);
    if (scaled >= (plain ? 1e15 : 1e6) || (scaled < 1.0 && !plain)) return;
    const std::string number = fmt::format("{:.{}g}", scaled, plain ? 15 : 6);
    double back = 0.0;
    std::from_chars(number.data(), number.data() + number.size(), back);
    const std::string text = number + std::string(prefix.symbol);
    if (std::abs(back * prefix.factor - count) <= relative_error * count &&
        (best.empty() || text.size() < best.size()))
      best = text;
  };
  for (const Prefix& prefix : kSiPrefixes) consider(prefix);
  for (const Prefix& prefix : kBinaryPrefixes) consider(prefix);
  return best;
}

// `count` to four significant digits with the largest SI prefix it reaches ("8.571k"), in
// exponent notation beyond them ("1e300").
std::string approximate_count(double count) {
  for (auto prefix = std::rbegin(kSiPrefixes); prefix != std::rend(kSiPrefixes); ++prefix) {
    if (count < prefix->factor && prefix->factor > 1.0) continue;
    const double scaled = count / prefix->factor;
    if (scaled >= 9999.5 || scaled < 1e-3) break;
    return fmt::format("{:.4g}{}", scaled, prefix->symbol);
  }
  return plain_exponent(fmt::format("{:.4g}", count));
}

// `value` to three significant digits with a prefix: {"1.23", "M"}, {"20", ""}, {"1.00e15", ""}.
std::pair<std::string, std::string_view> three_digits(double value, bool binary_prefix) {
  const auto& prefixes = binary_prefix ? kBinaryPrefixes : kSiPrefixes;
  const double base = binary_prefix ? 1024.0 : 1000.0;
  std::size_t prefix = 0;
  double scaled = value;
  while (scaled >= 999.5 && prefix + 1 < std::size(prefixes)) {
    scaled /= base;
    ++prefix;
  }
  // Beyond the prefixes, and below what two decimals show: "1.00e15", "4.00e-3".
  if (scaled >= 999.5 || (value > 0.0 && value < 0.01))
    return {plain_exponent(fmt::format("{:.2e}", value)), ""sv};
  const int decimals = prefix == 0 && scaled == std::floor(scaled) ? 0
                       : scaled < 9.995                            ? 2
                       : scaled < 99.95                            ? 1
                                                                   : 0;
  return {fmt::format("{:.{}f}", scaled, decimals), prefixes[prefix].symbol};
}

// "1.23 MB", "1.23k lines", "1 line", with `period` after the unit.
std::string measured(double units, const Notation& notation, std::string_view period) {
  const auto [number, prefix] = three_digits(shown_units(units, notation), notation.binary_prefix);
  if (is_data(notation))
    return fmt::format("{} {}{}{}", number, prefix, data_symbol(notation), period);
  const double count = number == "1" && prefix.empty() ? 1.0 : 0.0;
  return fmt::format("{}{} {}{}", number, prefix, counted_name(notation.counted, count), period);
}

// "/s", "/m", "/h", "/d" for those periods, else in seconds: "/15s", "/0.5s".
std::string period_symbol(double period_seconds) {
  for (const Period& period : kPeriods) {
    if (period.seconds == period_seconds) return std::string(period.symbol);
  }
  return fmt::format("/{:g}s", period_seconds);
}

// A period in the largest unit that counts it whole, the count left out when it is one: "h",
// "10m", "90s", "500ms".
std::string whole_period(std::chrono::nanoseconds period) {
  constexpr std::pair<std::int64_t, std::string_view> kUnits[] = {
      {86'400'000'000'000, "d"sv}, {3'600'000'000'000, "h"sv}, {60'000'000'000, "m"sv},
      {1'000'000'000, "s"sv},      {1'000'000, "ms"sv},        {1'000, "us"sv}};
  for (const auto& [nanoseconds, symbol] : kUnits) {
    if (period.count() % nanoseconds != 0) continue;
    const std::int64_t count = period.count() / nanoseconds;
    return count == 1 ? std::string(symbol) : fmt::format("{}{}", count, symbol);
  }
  return fmt::format("{}ns", period.count());
}

// The period a rate is shown per: the notation's, or the natural one.
double shown_period(double shown_per_second, const Notation& notation) {
  if (notation.period_seconds > 0.0 && shown_per_second * notation.period_seconds >= 1.0)
    return notation.period_seconds;
  return natural_period(shown_per_second);
}

}  // namespace

std::string_view counted_name(Counted counted, double count) {
  const bool one = count == 1.0;
  switch (counted) {
    case Counted::bytes:
      return one ? "byte" : "bytes";
    case Counted::lines:
      return one ? "line" : "lines";
    case Counted::records:
      return one ? "record" : "records";
    case Counted::permits:
      break;
  }
  return one ? "permit" : "permits";
}

double natural_period(double units_per_second) {
  for (const Period& period : kPeriods) {
    const double count = units_per_second * period.seconds;
    if (count >= 1.0 && is_whole(count)) return period.seconds;
  }
  for (const Period& period : kPeriods) {
    if (units_per_second * period.seconds >= 1.0) return period.seconds;
  }
  return kPeriods[std::size(kPeriods) - 1].seconds;
}

std::string notation_text(const Notation& notation) {
  return fmt::format("{} {} {} {}",
                     is_data(notation) && notation.bits ? "bits"sv : counted_name(notation.counted),
                     notation.binary_prefix ? "iec" : "si", notation.period_seconds,
                     notation.burst_in_units ? "units" : "time");
}

std::optional<Notation> notation_of_text(std::string_view text) {
  std::string_view fields[4];
  for (std::string_view& field : fields) field = take_field(text, ' ');
  Notation notation;
  const auto [counted, prefixes, period, burst] = fields;
  if (counted == "bytes" || counted == "bits") {
    notation.counted = Counted::bytes;
    notation.bits = counted == "bits";
  } else if (counted == "lines") {
    notation.counted = Counted::lines;
  } else if (counted == "records") {
    notation.counted = Counted::records;
  } else if (counted != "permits") {
    return std::nullopt;
  }
  const auto [end, error] =
      std::from_chars(period.data(), period.data() + period.size(), notation.period_seconds);
  if ((prefixes != "si" && prefixes != "iec") || error != std::errc() ||
      end != period.data() + period.size() || !(notation.period_seconds >= 0.0) ||
      std::isinf(notation.period_seconds) || (burst != "time" && burst != "units") || !text.empty())
    return std::nullopt;
  notation.binary_prefix = prefixes == "iec";
  notation.burst_in_units = burst == "units";
  return notation;
}

std::string written_rate(double units_per_second, const Notation& notation) {
  if (std::isinf(units_per_second)) return "off";
  const double per_second = shown_units(units_per_second, notation);
  const double period = shown_period(per_second, notation);
  const double count = per_second * period;
  std::string text = exact_count(count);
  if (text.empty()) text = approximate_count(count);
  return text + std::string(is_data(notation) ? data_symbol(notation) : ""sv) +
         period_symbol(period);
}

std::string rate_with_unit(double units_per_second, const Notation& notation) {
  std::string text = written_rate(units_per_second, notation);
  const std::size_t slash = text.find('/');
  if (is_data(notation) || slash == std::string::npos) return text;
  const std::string_view count = std::string_view(text).substr(0, slash);
  text.insert(slash, fmt::format(" {}", counted_name(notation.counted, count == "1" ? 1.0 : 0.0)));
  return text;
}

std::string written_burst(double burst_seconds, double units_per_second, const Notation& notation) {
  const double units = shown_units(burst_seconds * units_per_second, notation);
  if (!notation.burst_in_units || !std::isfinite(units)) return fmt::format("{:g}s", burst_seconds);
  std::string text = units == 0.0 ? "0" : exact_count(units);
  if (text.empty()) text = approximate_count(units);
  return text + std::string(is_data(notation) ? data_symbol(notation) : ""sv);
}

std::string measured_amount(double units, const Notation& notation) {
  return measured(units, notation, "");
}

std::string measured_rate(double units_per_second, const Notation& notation) {
  if (std::isinf(units_per_second)) return "off";
  if (notation.period_seconds > 0.0)
    return measured(units_per_second * notation.period_seconds, notation,
                    period_symbol(notation.period_seconds));
  const double shown = shown_units(units_per_second, notation);
  for (const Period& period : kPeriods) {
    if (shown == 0.0 || shown * period.seconds >= 1.0 || &period == std::end(kPeriods) - 1)
      return measured(units_per_second * period.seconds, notation, period.symbol);
  }
  return {};  // not reached: the last period always answers
}

std::string written_quota(const QuotaParams& quota, const Notation& notation) {
  const double units = shown_units(static_cast<double>(quota.limit), notation);
  // A limit is counted to the unit: a prefix only where it reads back as the very same number.
  std::string amount = is_data(notation) ? exact_count(units, 0.0) : std::string();
  if (amount.empty()) amount = fmt::format("{:.0f}", units);
  if (is_data(notation)) amount += data_symbol(notation);
  return fmt::format("{}/{}", amount, whole_period(quota.period));
}

std::string stored_count(double permits) {
  if (std::isinf(permits)) return "unlimited";
  if (permits >= 1e9) return plain_exponent(fmt::format("{:.2e}", permits));
  return fmt::format("{:.2f}", permits);
}

std::string human_duration(std::chrono::duration<double> duration) {
  constexpr double kYear = 365.25 * 86400.0;
  const double seconds = duration.count();
  if (seconds < 59.9995) {
    std::string text = fmt::format("{:.3f}", std::max(seconds, 0.0));
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.') text.pop_back();
    return text + "s";
  }
  if (seconds >= 1000 * kYear) return "over 1000 years";
  if (seconds >= kYear) return fmt::format("{:.1f} years", seconds / kYear);
  // Whole seconds not yet over: a wait of 3599.9 s is "59m59s", as a countdown shows it.
  const auto total = static_cast<std::int64_t>(seconds);
  const std::pair<std::int64_t, char> parts[] = {
      {total / 86400, 'd'}, {total / 3600 % 24, 'h'}, {total / 60 % 60, 'm'}, {total % 60, 's'}};
  std::string text;
  for (const auto& [count, symbol] : parts) {
    if (count > 0) text += fmt::format("{}{}", count, symbol);
  }
  return text;
}

}  // namespace ratelimit::format
