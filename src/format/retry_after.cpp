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

constexpr std::array<std::string_view, 7> kDays = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kLongDays = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

bool is_day_name(std::string_view text) {
  return std::find(kDays.begin(), kDays.end(), text) != kDays.end();
}

// The Unix seconds of `time_of_day` ("08:49:37") on `day` `month` ("Nov") `year`, or none if that
// is no moment (a month, a day or a time that does not exist).
std::optional<std::int64_t> unix_seconds(int year, std::string_view month, std::optional<int> day,
                                         std::string_view time_of_day) {
  const auto month_at = std::find(kMonths.begin(), kMonths.end(), month);
  if (month_at == kMonths.end() || !day || time_of_day.size() != 8 || time_of_day[2] != ':' ||
      time_of_day[5] != ':')
    return std::nullopt;
  const auto hour = fixed_number(time_of_day.substr(0, 2), 2);
  const auto minute = fixed_number(time_of_day.substr(3, 2), 2);
  const auto second = fixed_number(time_of_day.substr(6, 2), 2);
  if (!hour || !minute || !second || *hour > 23 || *minute > 59 || *second > 60)
    return std::nullopt;
  const std::chrono::year_month_day date{
      std::chrono::year(year),
      std::chrono::month(static_cast<unsigned>(month_at - kMonths.begin() + 1)),
      std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok()) return std::nullopt;
  const std::int64_t days = std::chrono::sys_days(date).time_since_epoch().count();
  return days * 86400 + *hour * 3600 + *minute * 60 + *second;
}

// IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
std::optional<std::int64_t> imf_fixdate(std::string_view text) {
  // 29 characters with blanks and commas at fixed places.
  if (text.size() != 29 || !is_day_name(text.substr(0, 3)) || text.substr(3, 2) != ", " ||
      text[7] != ' ' || text[11] != ' ' || text[16] != ' ' || text.substr(25) != " GMT")
    return std::nullopt;
  const auto year = fixed_number(text.substr(12, 4), 4);
  if (!year) return std::nullopt;
  return unix_seconds(*year, text.substr(8, 3), fixed_number(text.substr(5, 2), 2),
                      text.substr(17, 8));
}

// The obsolete RFC 850 form: "Sunday, 06-Nov-94 08:49:37 GMT". Its two-digit year is the latest
// year ending in them that is not more than 50 years after `now_unix_seconds` (RFC 9110, 5.6.7:
// a date that looks more than 50 years ahead is in the century before).
std::optional<std::int64_t> rfc850_date(std::string_view text, std::int64_t now_unix_seconds) {
  const auto comma = text.find(", ");
  if (comma == std::string_view::npos ||
      std::find(kLongDays.begin(), kLongDays.end(), text.substr(0, comma)) == kLongDays.end())
    return std::nullopt;
  text.remove_prefix(comma + 2);
  // "06-Nov-94 08:49:37 GMT"
  if (text.size() != 22 || text[2] != '-' || text[6] != '-' || text[9] != ' ' ||
      text.substr(18) != " GMT")
    return std::nullopt;
  const auto two_digits = fixed_number(text.substr(7, 2), 2);
  if (!two_digits) return std::nullopt;
  const std::string_view month = text.substr(3, 3), time_of_day = text.substr(10, 8);
  const std::optional<int> day = fixed_number(text.substr(0, 2), 2);
  const std::chrono::year_month_day today{std::chrono::floor<std::chrono::days>(
      std::chrono::sys_seconds(std::chrono::seconds(now_unix_seconds)))};
  const int latest_year = static_cast<int>(today.year()) + 50;
  const int year = latest_year - ((latest_year - *two_digits) % 100 + 100) % 100;
  std::optional<std::int64_t> seconds = unix_seconds(year, month, day, time_of_day);
  if (seconds && year == latest_year) {
    // In the 50th year ahead: beyond this moment 50 years on (29 February on 28 February).
    std::chrono::year_month_day fifty_years_on{std::chrono::year(latest_year), today.month(),
                                               today.day()};
    if (!fifty_years_on.ok()) fifty_years_on = std::chrono::year(latest_year) / today.month() / 28;
    const auto day_seconds = [](std::chrono::sys_days day) -> std::int64_t {
      return day.time_since_epoch().count() * 86400;
    };
    if (*seconds > day_seconds(fifty_years_on) + now_unix_seconds - day_seconds(today))
      seconds = unix_seconds(year - 100, month, day, time_of_day);
  }
  return seconds;
}

// ANSI C's asctime() form: "Sun Nov  6 08:49:37 1994" (a day below 10 after a blank).
std::optional<std::int64_t> asctime_date(std::string_view text) {
  if (text.size() != 24 || !is_day_name(text.substr(0, 3)) || text[3] != ' ' || text[7] != ' ' ||
      text[10] != ' ' || text[19] != ' ')
    return std::nullopt;
  const auto year = fixed_number(text.substr(20, 4), 4);
  if (!year) return std::nullopt;
  const std::string_view day_text = text.substr(8, 2);
  return unix_seconds(
      *year, text.substr(4, 3),
      day_text[0] == ' ' ? fixed_number(day_text.substr(1), 1) : fixed_number(day_text, 2),
      text.substr(11, 8));
}

}  // namespace

std::optional<nanoseconds> retry_after_delay(std::string_view text, std::int64_t now_unix_seconds) {
  text = trimmed(text);
  if (text.empty()) return nanoseconds::zero();
  std::optional<std::int64_t> seconds = delay_seconds(text);
  if (!seconds) {
    std::optional<std::int64_t> date = imf_fixdate(text);
    if (!date) date = rfc850_date(text, now_unix_seconds);
    if (!date) date = asctime_date(text);
    if (!date) return std::nullopt;
    seconds = std::clamp(*date - now_unix_seconds, std::int64_t{0}, kMostSeconds);
  }
  return std::chrono::seconds(*seconds);
}

}  // namespace ratelimit::format
