#include "pipe/rate_schedule.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "io/local_time_posix.hpp"

namespace ratelimit::pipe {
namespace {

using namespace std::chrono;
using namespace std::chrono_literals;

class UtcZone final : public TimeZone {
 public:
  seconds utc_offset(sys_seconds) const override { return 0s; }
};

// 2026-11-30 is a Monday.
const sys_seconds kMondayMidnight = sys_days(2026y / November / 30);

struct ScheduleTest : ::testing::Test {
  UtcZone zone;
  system_clock::time_point wall = kMondayMidnight + 7h + 59min + 30s + 250ms;
  TimetableSchedule schedule{
      Timetable({{std::nullopt, 8 * 60, 1000.0}, {std::nullopt, 18 * 60, 50.0}}), 1.0, zone,
      [this] { return wall; }};
};

TEST_F(ScheduleTest, ChangeFallsOnTheMonotonicClockAtItsWallClockTime) {
  const RatePeriod period = schedule.at(5s);
  EXPECT_EQ(period.units_per_second, 50.0);
  EXPECT_EQ(period.until, 5s + 29750ms);
  wall += 29750ms;
  const RatePeriod next = schedule.at(5s + 29750ms);
  EXPECT_EQ(next.units_per_second, 1000.0);
  EXPECT_EQ(next.until, 5s + 29750ms + 10h);
}

TEST_F(ScheduleTest, AWallClockStepIsNoticedAtTheNextTurn) {
  EXPECT_EQ(schedule.at(5s).units_per_second, 50.0);
  wall += 3h;  // stepped forward while the monotonic clock moved 1 ms
  const RatePeriod stepped = schedule.at(5001ms);
  EXPECT_EQ(stepped.units_per_second, 1000.0);
  EXPECT_EQ(stepped.until, 5001ms + 7h + 29750ms);
}

TEST_F(ScheduleTest, EachEntryIsNamedByItsEnd) {
  EXPECT_EQ(schedule.at(5s).entry_until, (kMondayMidnight + 8h).time_since_epoch().count());
  wall += 29750ms;
  EXPECT_EQ(schedule.at(5s + 29750ms).entry_until,
            (kMondayMidnight + 18h).time_since_epoch().count());
}

TEST_F(ScheduleTest, FollowsAnotherTimetableOrHoldsTheRateInForce) {
  EXPECT_EQ(schedule.at(5s).units_per_second, 50.0);
  schedule.follow(std::nullopt);
  const RatePeriod held = schedule.at(6s);
  EXPECT_EQ(held.units_per_second, 50.0);
  EXPECT_EQ(held.until, nanoseconds::max());
  EXPECT_EQ(held.entry_until, 0);
  wall += 1h;
  EXPECT_EQ(schedule.at(7s).units_per_second, 50.0);
  schedule.follow(Timetable({{std::nullopt, 0, 7.0}}));
  const RatePeriod followed = schedule.at(8s);
  EXPECT_EQ(followed.units_per_second, 7.0);
  EXPECT_EQ(followed.until, 8s + 15h + 29750ms);
}

TEST(TimetableScheduleWithout, HoldsItsRate) {
  const UtcZone zone;
  TimetableSchedule schedule(std::nullopt, 42.0, zone, [] { return kMondayMidnight; });
  EXPECT_EQ(schedule.at(1s).units_per_second, 42.0);
  EXPECT_EQ(schedule.at(1s).until, nanoseconds::max());
}

TEST_F(ScheduleTest, OrdinaryDriftKeepsThePeriod) {
  const RatePeriod period = schedule.at(5s);
  wall += 10s + 5ms;  // 5 ms of drift in 10 s
  EXPECT_EQ(schedule.at(15s).until, period.until);
}

// The C library's zone, as the program uses it, agrees with the EU rule on a spring-forward night.
TEST(LocalTimeZone, FollowsTzIncludingDaylightSaving) {
  const char* previous = std::getenv("TZ");
  const std::optional<std::string> saved =
      previous ? std::optional<std::string>(previous) : std::nullopt;
  ::setenv("TZ", "Europe/Berlin", 1);
  const io::LocalTimeZone berlin;
  const sys_seconds jump = sys_days(2026y / March / 29) + 1h;
  EXPECT_EQ(berlin.utc_offset(jump - 1s), 1h);
  EXPECT_EQ(berlin.utc_offset(jump), 2h);
  const Timetable table({{std::nullopt, 2 * 60 + 30, 1000.0}, {std::nullopt, 12 * 60, 2000.0}});
  EXPECT_EQ(table.at(jump - 1s, berlin).next_change, jump);
  if (saved) {
    ::setenv("TZ", saved->c_str(), 1);
  } else {
    ::unsetenv("TZ");
  }
  ::tzset();
}

}  // namespace
}  // namespace ratelimit::pipe
