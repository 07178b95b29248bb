#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ratelimit/timetable.hpp"

namespace ratelimit::pipe {

// A rate and the time (on the engine's monotonic clock) until which it holds.
struct RatePeriod {
  double units_per_second = 0.0;
  std::chrono::nanoseconds until = std::chrono::nanoseconds::max();
  // A timetable's entry: when it ends, in Unix seconds (stores::KeySchedule::entry_until); 0
  // without a timetable.
  std::int64_t entry_until = 0;
};

// The rate in force over time. The engine asks at every turn, so that a change lands at its
// time even while it waits.
class RateSchedule {
 public:
  virtual ~RateSchedule() = default;
  virtual RatePeriod at(std::chrono::nanoseconds now) = 0;
  // Another timetable from now on (`ratelimit set`, or a shared key's); none: the rate in force
  // holds.
  virtual void follow(std::optional<Timetable> timetable) = 0;
};

// A timetable followed on the wall clock, or one rate while there is none. The timetable is
// consulted again at each change, and whenever the wall clock has moved against the monotonic one
// (an NTP step, a suspend) since the last time, so such a jump is noticed at the next turn.
class TimetableSchedule final : public RateSchedule {
 public:
  using WallClock = std::function<std::chrono::system_clock::time_point()>;

  // `rate` holds while there is no timetable.
  TimetableSchedule(std::optional<Timetable> timetable, double rate, const TimeZone& zone,
                    WallClock wall_clock);

  RatePeriod at(std::chrono::nanoseconds now) override;
  void follow(std::optional<Timetable> timetable) override;
  // The timetable followed, as format::timetable_text() writes it; empty: none.
  const std::string& timetable_text() const { return timetable_text_; }

 private:
  std::optional<Timetable> timetable_;
  std::string timetable_text_;
  const TimeZone& zone_;
  WallClock wall_clock_;
  RatePeriod period_;
  std::chrono::nanoseconds wall_minus_monotonic_{0};
  bool looked_up_ = false;
};

}  // namespace ratelimit::pipe
