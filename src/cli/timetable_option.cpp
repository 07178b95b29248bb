#include "cli/timetable_option.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <string>

#include "cli/units.hpp"

namespace ratelimit::cli {
namespace {

constexpr std::array<std::string_view, 7> kWeekdays{"monday", "tuesday",  "wednesday", "thursday",
                                                    "friday", "saturday", "sunday"};

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  }
  return true;
}

[[noreturn]] void reject(std::string_view entry, std::string_view why) {
  throw UsageError("invalid timetable entry '" + std::string(entry) + "': " + std::string(why));
}

int weekday_of(std::string_view name, std::string_view entry) {
  for (std::size_t day = 0; day < kWeekdays.size(); ++day) {
    if (equal_ignoring_case(name, kWeekdays[day].substr(0, 3)) ||
        equal_ignoring_case(name, kWeekdays[day]))
      return static_cast<int>(day);
  }
  reject(entry, "unknown day '" + std::string(name) + "' (Mon..Sun, or the full name)");
}

// "H:MM" or "HH:MM" on a 24-hour clock, as minutes since midnight.
int minute_of_day(std::string_view time, std::string_view entry) {
  auto number = [&](std::string_view digits, int limit, std::string_view what) {
    int value = -1;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() ||
        value < 0 || value > limit)
      reject(entry, std::string(what) + " must be from 0 to " + std::to_string(limit));
    return value;
  };
  const std::size_t colon = time.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 2 || time.size() - colon != 3)
    reject(entry, "expected a time as HH:MM");
  return number(time.substr(0, colon), 23, "the hour") * 60 +
         number(time.substr(colon + 1), 59, "the minutes");
}

}  // namespace

bool is_timetable(std::string_view text) { return text.find(',') != std::string_view::npos; }

std::vector<TimetableEntry> parse_timetable(
    std::string_view text, const std::function<double(std::string_view rate)>& rate_of) {
  std::vector<TimetableEntry> entries;
  constexpr std::string_view kSeparators = " \t;";
  std::size_t position = 0;
  while ((position = text.find_first_not_of(kSeparators, position)) != std::string_view::npos) {
    const std::size_t end = std::min(text.find_first_of(kSeparators, position), text.size());
    const std::string_view entry = text.substr(position, end - position);
    position = end;

    const std::size_t comma = entry.find(',');
    if (comma == std::string_view::npos) reject(entry, "expected [DAY-]HH:MM,RATE");
    std::string_view when = entry.substr(0, comma);
    const std::string_view rate = entry.substr(comma + 1);
    TimetableEntry parsed;
    if (const std::size_t dash = when.find('-'); dash != std::string_view::npos) {
      parsed.weekday = weekday_of(when.substr(0, dash), entry);
      when.remove_prefix(dash + 1);
    }
    parsed.minute_of_day = minute_of_day(when, entry);
    if (rate.empty()) reject(entry, "expected a rate or 'off' after the comma");
    if (equal_ignoring_case(rate, "off")) {
      parsed.permits_per_second = std::numeric_limits<double>::infinity();
    } else {
      try {
        parsed.permits_per_second = rate_of(rate);
      } catch (const UsageError& error) {
        reject(entry, error.what());
      }
    }
    entries.push_back(parsed);
  }
  return entries;
}

}  // namespace ratelimit::cli
