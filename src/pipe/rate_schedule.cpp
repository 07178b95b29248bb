#include "pipe/rate_schedule.hpp"

#include "format/timetable_text.hpp"

namespace ratelimit::pipe {

using std::chrono::nanoseconds;

namespace {

// Less than this between the wall clock and the monotonic clock is their ordinary drift (NTP
// slews at most 0.5 ms a second), more is a step.
constexpr nanoseconds kClockStep = std::chrono::seconds(1);

}  // namespace

TimetableSchedule::TimetableSchedule(std::optional<Timetable> timetable, double rate,
                                     const TimeZone& zone, WallClock wall_clock)
    : timetable_(std::move(timetable)),
      timetable_text_(timetable_ ? format::timetable_text(*timetable_) : std::string()),
      zone_(zone),
      wall_clock_(std::move(wall_clock)),
      period_{.units_per_second = rate} {}

void TimetableSchedule::follow(std::optional<Timetable> timetable) {
  timetable_ = std::move(timetable);
  timetable_text_ = timetable_ ? format::timetable_text(*timetable_) : std::string();
  looked_up_ = false;
  period_.until = nanoseconds::max();
  period_.entry_until = 0;
}

RatePeriod TimetableSchedule::at(nanoseconds now) {
  if (!timetable_) return period_;
  const std::chrono::system_clock::time_point wall = wall_clock_();
  const nanoseconds wall_minus_monotonic = wall.time_since_epoch() - now;
  const nanoseconds drift = wall_minus_monotonic - wall_minus_monotonic_;
  if (looked_up_ && now < period_.until && drift < kClockStep && drift > -kClockStep)
    return period_;
  const TimetablePeriod period =
      timetable_->at(std::chrono::floor<std::chrono::seconds>(wall), zone_);
  period_ = {.units_per_second = period.permits_per_second,
             .until = now + (period.next_change - wall),
             .entry_until = period.next_change.time_since_epoch().count()};
  wall_minus_monotonic_ = wall_minus_monotonic;
  looked_up_ = true;
  return period_;
}

}  // namespace ratelimit::pipe
