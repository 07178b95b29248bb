#include "format/timetable_text.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "errors.hpp"

namespace ratelimit::format {
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

// The entries of `text`, each rate read by `read_rate`: parse_rate() as people write rates, or
// a plain number of units per second as timetable_text() writes them.
std::vector<WrittenTimetableEntry> entries_of(std::string_view text,
                                              Rate (*read_rate)(std::string_view)) {
  std::vector<WrittenTimetableEntry> entries;
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
    WrittenTimetableEntry written;
    written.text = entry;
    written.rate_text = rate;
    TimetableEntry& parsed = written.entry;
    if (const std::size_t dash = when.find('-'); dash != std::string_view::npos) {
      parsed.weekday = weekday_of(when.substr(0, dash), entry);
      when.remove_prefix(dash + 1);
    }
    // A range of days: "Mon-Fri-09:00".
    if (const std::size_t dash = when.find('-'); dash != std::string_view::npos) {
      parsed.last_weekday = weekday_of(when.substr(0, dash), entry);
      when.remove_prefix(dash + 1);
    }
    parsed.minute_of_day = minute_of_day(when, entry);
    if (rate.empty()) reject(entry, "expected a rate or 'off' after the comma");
    if (equal_ignoring_case(rate, "off")) {
      parsed.permits_per_second = std::numeric_limits<double>::infinity();
    } else {
      try {
        const Rate read = read_rate(rate);
        parsed.permits_per_second = read.units_per_second;
        written.unit = read.unit;
      } catch (const UsageError& error) {
        reject(entry, error.what());
      }
    }
    entries.push_back(std::move(written));
  }
  return entries;
}

// A number of units per second, as timetable_text() writes a rate.
Rate plain_number(std::string_view text) {
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw UsageError("not a number of units per second");
  return Rate{value, DataUnit::unspecified};
}

}  // namespace

bool is_timetable(std::string_view text) { return text.find(',') != std::string_view::npos; }

std::vector<WrittenTimetableEntry> parse_timetable(std::string_view text) {
  return entries_of(text, parse_rate);
}

std::string entry_text(const TimetableEntry& entry,
                       const std::function<std::string(double units_per_second)>& rate_text) {
  std::string text;
  for (const std::optional<int>& weekday : {entry.weekday, entry.last_weekday}) {
    if (!weekday) continue;
    const std::string_view day = kWeekdays[static_cast<std::size_t>(*weekday)];
    text += static_cast<char>(std::toupper(static_cast<unsigned char>(day[0])));
    text += day.substr(1, 2);
    text += '-';
  }
  const int hours = entry.minute_of_day / 60;
  const int minutes = entry.minute_of_day % 60;
  text += {static_cast<char>('0' + hours / 10),   static_cast<char>('0' + hours % 10),   ':',
           static_cast<char>('0' + minutes / 10), static_cast<char>('0' + minutes % 10), ','};
  text += std::isinf(entry.permits_per_second) ? "off" : rate_text(entry.permits_per_second);
  return text;
}

std::string timetable_text(const Timetable& timetable) {
  std::vector<TimetableEntry> entries = timetable.entries();
  std::sort(entries.begin(), entries.end(), [](const TimetableEntry& a, const TimetableEntry& b) {
    return std::tuple(a.weekday.value_or(-1), a.minute_of_day, a.last_weekday.value_or(-1)) <
           std::tuple(b.weekday.value_or(-1), b.minute_of_day, b.last_weekday.value_or(-1));
  });
  const auto shortest = [](double units_per_second) {
    // The shortest text that reads back as the same double.
    char digits[32];
    const auto result = std::to_chars(digits, digits + sizeof digits, units_per_second);
    return std::string(digits, result.ptr);
  };
  std::string text;
  for (const TimetableEntry& entry : entries) {
    if (!text.empty()) text += ';';
    text += entry_text(entry, shortest);
  }
  return text;
}

std::optional<Timetable> parse_timetable_text(std::string_view text) {
  try {
    std::vector<TimetableEntry> entries;
    for (const WrittenTimetableEntry& written : entries_of(text, plain_number))
      entries.push_back(written.entry);
    return Timetable(std::move(entries));
  } catch (const UsageError&) {
    return std::nullopt;
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace ratelimit::format
