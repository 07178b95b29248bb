#include "ratelimit/timetable.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

namespace ratelimit {
namespace {

using std::chrono::seconds;
using std::chrono::sys_seconds;

constexpr seconds kDay{86400};
constexpr seconds kWeek = 7 * kDay;
// Far enough from a wall-clock time that the offset there is the one of the day before or after
// (the widest offsets are -12 h and +14 h, and no zone changes its offset twice in four days).
constexpr seconds kOffsetProbe = 2 * kDay;

constexpr std::array<const char*, 7> kWeekdayNames{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};

std::string describe(const TimetableEntry& entry) {
  std::string text;
  const auto day_name = [](int day) -> std::string {
    return day >= 0 && day < 7 ? kWeekdayNames[day] : "day " + std::to_string(day);
  };
  if (entry.weekday) text = day_name(*entry.weekday) + '-';
  if (entry.last_weekday) text += day_name(*entry.last_weekday) + '-';
  auto append_two_digits = [&text](int value) {
    if (value < 10) text += '0';
    text += std::to_string(value);
  };
  append_two_digits(entry.minute_of_day / 60);
  text += ':';
  append_two_digits(entry.minute_of_day % 60);
  return text;
}

[[noreturn]] void reject(const TimetableEntry& entry, const std::string& what) {
  throw std::invalid_argument("timetable entry " + describe(entry) + ": " + what);
}

// Seconds since the epoch of local time written as if it were UTC: "local seconds".
seconds local_seconds_at(sys_seconds instant, const TimeZone& zone) {
  return instant.time_since_epoch() + zone.utc_offset(instant);
}

seconds floor_modulo(seconds value, seconds divisor) {
  seconds remainder = value % divisor;
  return remainder < seconds::zero() ? remainder + divisor : remainder;
}

// Monday 00:00 of the week holding `local`, in local seconds. The epoch was a Thursday.
seconds week_start(seconds local) {
  constexpr seconds kThursdayOffset = 3 * kDay;
  return local - floor_modulo(local + kThursdayOffset, kWeek);
}

// The first instant at which local time reaches `local`: its only occurrence, its first one when
// local time repeats it, or the end of the gap when local time skips it.
sys_seconds first_instant_reaching(seconds local, const TimeZone& zone) {
  const sys_seconds as_if_utc{local};
  const sys_seconds before = as_if_utc - zone.utc_offset(as_if_utc - kOffsetProbe);
  const sys_seconds after = as_if_utc - zone.utc_offset(as_if_utc + kOffsetProbe);
  auto reaches_exactly = [&](sys_seconds instant) {
    return local_seconds_at(instant, zone) == local;
  };
  const bool before_valid = reaches_exactly(before), after_valid = reaches_exactly(after);
  if (before_valid && after_valid) return std::min(before, after);
  if (before_valid) return before;
  if (after_valid) return after;
  // Skipped: local time jumps over `local` between the two candidates.
  sys_seconds low = std::min(before, after), high = std::max(before, after);
  while (high - low > seconds{1}) {
    const sys_seconds middle = low + (high - low) / 2;
    (local_seconds_at(middle, zone) >= local ? high : low) = middle;
  }
  return high;
}

}  // namespace

Timetable::Timetable(std::vector<TimetableEntry> entries) : entries_(std::move(entries)) {
  if (entries_.empty()) throw std::invalid_argument("a timetable needs at least one entry");
  // How specific an entry is: the more specific one holds at the same time of the same day.
  enum Days { every_day, day_range, one_day };
  struct Candidate {
    Boundary boundary;
    Days days;
  };
  std::vector<Candidate> candidates;
  for (std::size_t index = 0; index < entries_.size(); ++index) {
    const TimetableEntry& entry = entries_[index];
    for (const std::optional<int>& day : {entry.weekday, entry.last_weekday}) {
      if (day && (*day < 0 || *day > 6))
        reject(entry, "the weekday must be from 0 (Monday) to 6 (Sunday)");
    }
    if (entry.last_weekday && !entry.weekday) reject(entry, "a last weekday needs a first");
    if (entry.minute_of_day < 0 || entry.minute_of_day >= 24 * 60)
      reject(entry, "the time must be from 00:00 to 23:59");
    if (!(entry.permits_per_second > 0.0)) reject(entry, "the rate must be positive");
    const seconds time_of_day = std::chrono::minutes(entry.minute_of_day);
    if (entry.weekday && entry.last_weekday) {
      // Mon-Fri: 0..4; Sat-Mon: 5, 6, 0.
      const int days = (*entry.last_weekday - *entry.weekday + 7) % 7 + 1;
      for (int i = 0; i < days; ++i)
        candidates.push_back(
            {{(*entry.weekday + i) % 7 * kDay + time_of_day, index}, Days::day_range});
    } else if (entry.weekday) {
      candidates.push_back({{*entry.weekday * kDay + time_of_day, index}, Days::one_day});
    } else {
      for (int day = 0; day < 7; ++day)
        candidates.push_back({{day * kDay + time_of_day, index}, Days::every_day});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.boundary.since_week_start != b.boundary.since_week_start)
                       return a.boundary.since_week_start < b.boundary.since_week_start;
                     return a.days > b.days;
                   });
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& candidate = candidates[i];
    if (i > 0 &&
        candidates[i - 1].boundary.since_week_start == candidate.boundary.since_week_start) {
      if (candidates[i - 1].days == candidate.days)
        reject(entries_[candidate.boundary.entry],
               "another entry takes effect at the same time (" +
                   describe(entries_[candidates[i - 1].boundary.entry]) + ")");
      continue;  // a less specific entry, overridden on this day
    }
    week_.push_back(candidate.boundary);
  }
}

TimetablePeriod Timetable::at(sys_seconds instant, const TimeZone& zone) const {
  // The week around `instant` and the weeks before and after it hold the boundary in force (at
  // most a week ago) and the next one (at most a week ahead), whatever the offsets.
  const seconds this_week = week_start(local_seconds_at(instant, zone));
  TimetablePeriod period;
  bool found_current = false;
  for (int week = -1; week <= 1; ++week) {
    for (const Boundary& boundary : week_) {
      const sys_seconds takes_effect =
          first_instant_reaching(this_week + week * kWeek + boundary.since_week_start, zone);
      if (takes_effect <= instant) {
        period.entry = boundary.entry;
        found_current = true;
      } else if (found_current) {
        period.permits_per_second = entries_[period.entry].permits_per_second;
        period.next_change = takes_effect;
        return period;
      }
    }
  }
  throw std::logic_error("timetable: no boundary found around the instant");
}

}  // namespace ratelimit
