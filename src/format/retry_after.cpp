#include "format/retry_after.hpp"

#include <algorithm>
#include <array>
#include <charconv>

namespace ratelimit::format {
namespace {

using std::chrono::nanoseconds;

// More than any service asks for (a century), and far from overflow in nanoseconds.
constexpr std::int64_t kMostSeconds = 100LL * 366 * 86400;

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// `digits` exactly `width` decimal digits, or none.
std::optional<int> fixed_number(std::string_view digits, std::size_t width) {
  if (digits.size() != width ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

std::optional<std::int64_t> delay_seconds(std::string_view text) {
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::int64_t seconds = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (error != std::errc() || end != text.data() + text.size()) return kMostSeconds;
  return std::min(seconds, kMostSeconds);
}

// IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT", as Unix seconds.
std::optional<std::int64_t> imf_fixdate(std::string_view text) {
  static constexpr std::array<std::string_view, 7> kDays = {"Mon", "Tue", "Wed", "Thu",
                                                            "Fri", "Sat", "Sun"};
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  // "Sun, 06 Nov 1994 08:49:37 GMT" is 29 characters with blanks and colons at fixed places.
  if (text.size() != 29 || text.substr(3, 2) != ", " || text[7] != ' ' || text[11] != ' ' ||
      text[16] != ' ' || text[19] != ':' || text[22] != ':' || text.substr(25) != " GMT")
    return std::nullopt;
  if (std::find(kDays.begin(), kDays.end(), text.substr(0, 3)) == kDays.end()) return std::nullopt;
  const auto month = std::find(kMonths.begin(), kMonths.end(), text.substr(8, 3));
  const auto day = fixed_number(text.substr(5, 2), 2);
  const auto year = fixed_number(text.substr(12, 4), 4);
  const auto hour = fixed_number(text.substr(17, 2), 2);
  const auto minute = fixed_number(text.substr(20, 2), 2);
  const auto second = fixed_number(text.substr(23, 2), 2);
  if (month == kMonths.end() || !day || !year || !hour || !minute || !second || *hour > 23 ||
      *minute > 59 || *second > 60)
    return std::nullopt;
  const std::chrono::year_month_day date{
      std::chrono::year(*year),
      std::chrono::month(static_cast<unsigned>(month - kMonths.begin() + 1)),
      std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok()) return std::nullopt;
  const std::int64_t days = std::chrono::sys_days(date).time_since_epoch().count();
  return days * 86400 + *hour * 3600 + *minute * 60 + *second;
}

}  // namespace

std::optional<nanoseconds> retry_after_delay(std::string_view text, std::int64_t now_unix_seconds) {
  text = trimmed(text);
  if (text.empty()) return nanoseconds::zero();
  std::optional<std::int64_t> seconds = delay_seconds(text);
  if (!seconds) {
    const std::optional<std::int64_t> date = imf_fixdate(text);
    if (!date) return std::nullopt;
    seconds = std::clamp(*date - now_unix_seconds, std::int64_t{0}, kMostSeconds);
  }
  return std::chrono::seconds(*seconds);
}

}  // namespace ratelimit::format
