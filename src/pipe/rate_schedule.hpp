#pragma once

#include <chrono>
#include <functional>

#include "ratelimit/timetable.hpp"

namespace ratelimit::pipe {

// A rate and the time (on the engine's monotonic clock) until which it holds.
struct RatePeriod {
  double units_per_second = 0.0;
  std::chrono::nanoseconds until = std::chrono::nanoseconds::max();
};

// The rate in force over time. The engine asks at every turn, so that a change lands at its
// time even while it waits.
class RateSchedule {
 public:
  virtual ~RateSchedule() = default;
  virtual RatePeriod at(std::chrono::nanoseconds now) = 0;
};

// A timetable followed on the wall clock. The timetable is consulted again at each change, and
// whenever the wall clock has moved against the monotonic one (an NTP step, a suspend) since the
// last time, so such a jump is noticed at the next turn.
class TimetableSchedule final : public RateSchedule {
 public:
  using WallClock = std::function<std::chrono::system_clock::time_point()>;

  TimetableSchedule(Timetable timetable, const TimeZone& zone, WallClock wall_clock);

  RatePeriod at(std::chrono::nanoseconds now) override;

 private:
  Timetable timetable_;
  const TimeZone& zone_;
  WallClock wall_clock_;
  RatePeriod period_;
  std::chrono::nanoseconds wall_minus_monotonic_{0};
  bool looked_up_ = false;
};

}  // namespace ratelimit::pipe
