#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace ratelimit {

// A rate that takes effect at a wall-clock time of one weekday, of a range of weekdays, or of every
// day (as rclone's bandwidth timetable writes it: "Mon-08:00,512k 18:00,10M Sat-00:00,off").
struct TimetableEntry {
  std::optional<int> weekday;       // 0 = Monday .. 6 = Sunday; none: every day
  int minute_of_day = 0;            // 0 .. 1439
  double permits_per_second = 0.0;  // +inf: no limit ("off")
  // With a weekday: the entry takes effect on each day from `weekday` to this one, past Sunday
  // if it comes before ("Mon-Fri-09:00,1M", "Sat-Sun-00:00,off"); none: on `weekday` alone.
  std::optional<int> last_weekday{};

  friend bool operator==(const TimetableEntry&, const TimetableEntry&) = default;
};

// The offset of local time from UTC at an instant. Injected so that the timetable stays pure: the
// program asks the C library (TZ honoured), tests give a zone with known rules.
class TimeZone {
 public:
  virtual ~TimeZone() = default;
  virtual std::chrono::seconds utc_offset(std::chrono::sys_seconds instant) const = 0;
};

// The entry in force at an instant, and when the next one takes over.
struct TimetablePeriod {
  std::size_t entry = 0;  // index into Timetable::entries()
  double permits_per_second = 0.0;
  std::chrono::sys_seconds next_change;
};

// A weekly cycle of rates. Each entry holds until the next one in the week; the last one of the
// week holds until the first one of the next week. At a wall-clock time that local time skips
// (spring forward), the entry takes effect at the first instant after it; at one that local time
// repeats (fall back), it takes effect once, at the first occurrence.
class Timetable {
 public:
  // Throws std::invalid_argument naming the bad entry: none at all, a weekday or minute out of
  // range (or a last weekday without a first), a rate that is not positive, or two entries as
  // specific for the same time of the same day. At the same time of a day, an entry for that
  // weekday alone overrides one for a range of days, which overrides an every-day entry.
  explicit Timetable(std::vector<TimetableEntry> entries);

  TimetablePeriod at(std::chrono::sys_seconds instant, const TimeZone& zone) const;

  const std::vector<TimetableEntry>& entries() const { return entries_; }

 private:
  struct Boundary {
    std::chrono::seconds since_week_start;  // local time since Monday 00:00
    std::size_t entry;
  };

  std::vector<TimetableEntry> entries_;
  std::vector<Boundary> week_;  // sorted by since_week_start, one per distinct time
};

}  // namespace ratelimit
