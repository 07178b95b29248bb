#include "ratelimit/timetable.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

#include "thrown.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono;
using namespace std::chrono_literals;

constexpr int kMonday = 0, kSaturday = 5, kSunday = 6;
constexpr double kOff = std::numeric_limits<double>::infinity();

class FixedZone final : public TimeZone {
 public:
  explicit FixedZone(seconds offset) : offset_(offset) {}
  seconds utc_offset(sys_seconds) const override { return offset_; }

 private:
  seconds offset_;
};

// Central European time as the EU rule has it since 1996: +1 h, and +2 h from 01:00 UTC on the
// last Sunday of March to 01:00 UTC on the last Sunday of October.
class CentralEuropeanZone final : public TimeZone {
 public:
  seconds utc_offset(sys_seconds instant) const override {
    const year y = year_month_day(floor<days>(instant)).year();
    const sys_seconds summer_starts = sys_days(y / March / Sunday[last]) + 1h;
    const sys_seconds summer_ends = sys_days(y / October / Sunday[last]) + 1h;
    return instant >= summer_starts && instant < summer_ends ? 2h : 1h;
  }
};

TimetableEntry every_day(int hour, int minute, double rate) {
  return {std::nullopt, hour * 60 + minute, rate};
}
TimetableEntry on(int weekday, int hour, int minute, double rate) {
  return {weekday, hour * 60 + minute, rate};
}

TimetableEntry on_days(int first, int last, int hour, int minute, double rate) {
  return {first, hour * 60 + minute, rate, last};
}

sys_seconds utc(year_month_day date, hours h, minutes m = 0min) { return sys_days(date) + h + m; }

const FixedZone kUtc{0s};

// 2026-11-30 is a Monday.
constexpr year_month_day kMondayDate = 2026y / November / 30;
constexpr year_month_day kSaturdayDate = 2026y / December / 5;
constexpr year_month_day kSundayDate = 2026y / December / 6;

TEST(Timetable, OneEntryHoldsAllWeekAndChangesToItselfNextDay) {
  const Timetable table({every_day(8, 0, 1000.0)});
  const TimetablePeriod period = table.at(utc(kMondayDate, 3h), kUtc);
  EXPECT_EQ(period.permits_per_second, 1000.0);
  EXPECT_EQ(period.next_change, utc(kMondayDate, 8h));
  EXPECT_EQ(table.at(utc(kMondayDate, 8h), kUtc).next_change, utc(2026y / December / 1, 8h));
}

// rclone's example shape: a weekday entry, an every-day entry, and "off" for the weekend.
const Timetable kWorkWeek({on(kMonday, 8, 0, 512e3), every_day(18, 0, 10e6),
                           on(kSaturday, 0, 0, kOff)});

TEST(Timetable, LastEntryOfTheWeekHoldsUntilTheFirstOfTheNext) {
  const TimetablePeriod sunday_night = kWorkWeek.at(utc(kSundayDate, 23h), kUtc);
  EXPECT_EQ(sunday_night.permits_per_second, 10e6);
  EXPECT_EQ(sunday_night.next_change, utc(2026y / December / 7, 8h));
  const TimetablePeriod monday_early = kWorkWeek.at(utc(kMondayDate, 7h, 59min), kUtc);
  EXPECT_EQ(monday_early.permits_per_second, 10e6);
  EXPECT_EQ(monday_early.next_change, utc(kMondayDate, 8h));
}

TEST(Timetable, EntryTakesEffectAtItsMinuteExactly) {
  EXPECT_EQ(kWorkWeek.at(utc(kMondayDate, 8h) - 1s, kUtc).permits_per_second, 10e6);
  EXPECT_EQ(kWorkWeek.at(utc(kMondayDate, 8h), kUtc).permits_per_second, 512e3);
  const TimetablePeriod working = kWorkWeek.at(utc(kMondayDate, 12h), kUtc);
  EXPECT_EQ(working.entry, 0u);
  EXPECT_EQ(working.next_change, utc(kMondayDate, 18h));
}

TEST(Timetable, EveryDayEntryAppliesOnEachDayAndOffIsUnlimited) {
  EXPECT_EQ(kWorkWeek.at(utc(2026y / December / 3, 20h), kUtc).permits_per_second, 10e6);
  const TimetablePeriod saturday = kWorkWeek.at(utc(kSaturdayDate, 10h), kUtc);
  EXPECT_EQ(saturday.permits_per_second, kOff);
  EXPECT_EQ(saturday.next_change, utc(kSaturdayDate, 18h));
  // Friday evening: the 18:00 rate, until the weekend's "off" at midnight.
  EXPECT_EQ(kWorkWeek.at(utc(2026y / December / 4, 20h), kUtc).next_change, utc(kSaturdayDate, 0h));
}

TEST(Timetable, OrderOfEntriesDoesNotMatter) {
  const Timetable shuffled(
      {on(kSaturday, 0, 0, kOff), every_day(18, 0, 10e6), on(kMonday, 8, 0, 512e3)});
  for (sys_seconds instant = utc(kMondayDate, 0h); instant < utc(2026y / December / 7, 0h);
       instant += 37min) {
    const TimetablePeriod expected = kWorkWeek.at(instant, kUtc), got = shuffled.at(instant, kUtc);
    EXPECT_EQ(got.permits_per_second, expected.permits_per_second)
        << instant.time_since_epoch().count();
    EXPECT_EQ(got.next_change, expected.next_change) << instant.time_since_epoch().count();
  }
}

TEST(Timetable, AnEntryPerDay) {
  std::vector<TimetableEntry> entries;
  for (int day = kMonday; day <= kSunday; ++day)
    entries.push_back(on(day, 9, 30, 100.0 * (day + 1)));
  const Timetable table(entries);
  EXPECT_EQ(table.at(utc(kMondayDate, 9h, 29min), kUtc).permits_per_second, 700.0);  // Sunday's
  EXPECT_EQ(table.at(utc(kSundayDate, 10h), kUtc).permits_per_second, 700.0);
  EXPECT_EQ(table.at(utc(kSundayDate, 10h), kUtc).next_change,
            utc(2026y / December / 7, 9h, 30min));
  EXPECT_EQ(table.at(utc(kSaturdayDate, 10h), kUtc).permits_per_second, 600.0);
}

TEST(Timetable, WeekdayEntryOverridesEveryDayEntryAtTheSameTime) {
  const Timetable table({every_day(8, 0, 1000.0), on(kSunday, 8, 0, 5.0)});
  EXPECT_EQ(table.at(utc(kSundayDate, 9h), kUtc).permits_per_second, 5.0);
  EXPECT_EQ(table.at(utc(kSaturdayDate, 9h), kUtc).permits_per_second, 1000.0);
}

TEST(Timetable, LocalTimeDecidesTheDay) {
  // 02:00 UTC on Monday is still Sunday 21:00 at -5 h, and already Monday 16:00 at +14 h.
  const Timetable table({on(kMonday, 0, 0, 1.0), on(kSunday, 0, 0, 2.0)});
  EXPECT_EQ(table.at(utc(kMondayDate, 2h), FixedZone(-5h)).permits_per_second, 2.0);
  EXPECT_EQ(table.at(utc(kMondayDate, 2h), FixedZone(-5h)).next_change, utc(kMondayDate, 5h));
  EXPECT_EQ(table.at(utc(kMondayDate, 2h), FixedZone(14h)).permits_per_second, 1.0);
}

TEST(Timetable, ClockStepIsSeenAtTheNextQuestion) {
  // The timetable keeps no memory: a clock stepped back to Monday gives Monday's entry.
  EXPECT_EQ(kWorkWeek.at(utc(kSaturdayDate, 10h), kUtc).permits_per_second, kOff);
  EXPECT_EQ(kWorkWeek.at(utc(kMondayDate, 10h), kUtc).permits_per_second, 512e3);
}

const CentralEuropeanZone kBerlin;

TEST(Timetable, SpringForwardEntryInTheSkippedHourTakesEffectWhenTheHourEnds) {
  // 2026-03-29: at 01:00 UTC local time jumps from 02:00 to 03:00; 02:30 never happens.
  const Timetable table({every_day(2, 30, 1000.0), every_day(12, 0, 2000.0)});
  const sys_seconds jump = utc(2026y / March / 29, 1h);
  const TimetablePeriod before = table.at(jump - 1s, kBerlin);
  EXPECT_EQ(before.permits_per_second, 2000.0);
  EXPECT_EQ(before.next_change, jump);
  const TimetablePeriod after = table.at(jump, kBerlin);
  EXPECT_EQ(after.permits_per_second, 1000.0);
  EXPECT_EQ(after.next_change, utc(2026y / March / 29, 10h));  // 12:00 summer time
  // Other nights are unaffected: 02:30 winter time is 01:30 UTC.
  EXPECT_EQ(table.at(utc(2026y / March / 28, 1h, 29min), kBerlin).next_change,
            utc(2026y / March / 28, 1h, 30min));
}

TEST(Timetable, FallBackEntryInTheRepeatedHourTakesEffectOnce) {
  // 2026-10-25: at 01:00 UTC local time goes back from 03:00 to 02:00, so 02:00-03:00 happens
  // twice.
  const Timetable table(
      {on(kSunday, 2, 15, 3000.0), every_day(2, 30, 1000.0), every_day(12, 0, 2000.0)});
  const year_month_day night = 2026y / October / 25;
  EXPECT_EQ(table.at(utc(night, 0h, 14min), kBerlin).next_change, utc(night, 0h, 15min));
  EXPECT_EQ(table.at(utc(night, 0h, 15min), kBerlin).permits_per_second, 3000.0);
  const TimetablePeriod first_pass = table.at(utc(night, 0h, 30min), kBerlin);
  EXPECT_EQ(first_pass.permits_per_second, 1000.0);
  EXPECT_EQ(first_pass.next_change, utc(night, 11h));  // 12:00 winter time
  // The second 02:15 and 02:30 (01:15 and 01:30 UTC) change nothing.
  EXPECT_EQ(table.at(utc(night, 1h, 20min), kBerlin).permits_per_second, 1000.0);
  EXPECT_EQ(table.at(utc(night, 1h, 40min), kBerlin).permits_per_second, 1000.0);
  EXPECT_EQ(table.at(utc(night, 1h, 40min), kBerlin).next_change, utc(night, 11h));
}

TEST(Timetable, RefusesEntriesItCannotFollow) {
  const auto message = [](std::vector<TimetableEntry> entries) {
    return message_thrown<std::invalid_argument>([&] { Timetable{std::move(entries)}; });
  };
  EXPECT_EQ(message({}), "a timetable needs at least one entry");
  EXPECT_EQ(message({on(7, 8, 0, 1.0)}),
            "timetable entry day 7-08:00: the weekday must be from 0 (Monday) to 6 (Sunday)");
  EXPECT_EQ(message({{std::nullopt, 24 * 60, 1.0}}),
            "timetable entry 24:00: the time must be from 00:00 to 23:59");
  EXPECT_EQ(message({every_day(8, 5, 0.0)}), "timetable entry 08:05: the rate must be positive");
  EXPECT_EQ(message({every_day(8, 5, std::numeric_limits<double>::quiet_NaN())}),
            "timetable entry 08:05: the rate must be positive");
  EXPECT_EQ(message({every_day(8, 0, 1.0), every_day(8, 0, 2.0)}),
            "timetable entry 08:00: another entry takes effect at the same time (08:00)");
  EXPECT_EQ(message({on(kSaturday, 0, 0, 1.0), on(kSaturday, 0, 0, kOff)}),
            "timetable entry Sat-00:00: another entry takes effect at the same time (Sat-00:00)");
}

// "Mon-Fri-09:00,1M Mon-Fri-17:00,off": working hours only, the weekend unlimited.
TEST(Timetable, DayRangeTakesEffectOnEachOfItsDays) {
  constexpr int kFriday = 4;
  const Timetable table(
      {on_days(kMonday, kFriday, 9, 0, 1e6), on_days(kMonday, kFriday, 17, 0, kOff)});
  EXPECT_EQ(table.at(utc(kMondayDate, 12h), kUtc).permits_per_second, 1e6);
  EXPECT_EQ(table.at(utc(2026y / December / 4, 12h), kUtc).permits_per_second, 1e6);
  EXPECT_EQ(table.at(utc(2026y / December / 4, 17h), kUtc).permits_per_second, kOff);
  const TimetablePeriod saturday = table.at(utc(kSaturdayDate, 12h), kUtc);
  EXPECT_EQ(saturday.permits_per_second, kOff);
  EXPECT_EQ(saturday.next_change, utc(2026y / December / 7, 9h));
}

TEST(Timetable, DayRangeWrapsPastSunday) {
  const Timetable table({on_days(kSaturday, kMonday, 0, 0, kOff), every_day(8, 0, 1e6)});
  EXPECT_EQ(table.at(utc(kSundayDate, 1h), kUtc).permits_per_second, kOff);
  EXPECT_EQ(table.at(utc(2026y / December / 7, 1h), kUtc).permits_per_second, kOff);
  // Tuesday 01:00: Monday's 08:00 holds, as no range entry is on Tuesday.
  EXPECT_EQ(table.at(utc(2026y / December / 8, 1h), kUtc).permits_per_second, 1e6);
}

TEST(Timetable, OneDayOverridesARangeWhichOverridesEveryDay) {
  constexpr int kWednesday = 2, kFriday = 4;
  const Timetable table(
      {every_day(9, 0, 5e6), on_days(kMonday, kFriday, 9, 0, 1e6), on(kWednesday, 9, 0, 2e6)});
  EXPECT_EQ(table.at(utc(2026y / December / 1, 12h), kUtc).permits_per_second, 1e6);
  EXPECT_EQ(table.at(utc(2026y / December / 2, 12h), kUtc).permits_per_second, 2e6);
  EXPECT_EQ(table.at(utc(kSaturdayDate, 12h), kUtc).permits_per_second, 5e6);
}

TEST(Timetable, RefusesDayRangesItCannotFollow) {
  const auto error_of = [](std::vector<TimetableEntry> entries) {
    return message_thrown<std::invalid_argument>([&] { Timetable{std::move(entries)}; });
  };
  EXPECT_EQ(error_of({on_days(kMonday, 4, 9, 0, 1e6), on_days(3, kSunday, 9, 0, 2e6)}),
            "timetable entry Thu-Sun-09:00: another entry takes effect at the same time "
            "(Mon-Fri-09:00)");
  EXPECT_EQ(error_of({{std::nullopt, 60, 1e6, 4}}),
            "timetable entry Fri-01:00: a last weekday needs a first");
  EXPECT_EQ(error_of({on_days(kMonday, 7, 9, 0, 1e6)}),
            "timetable entry Mon-day 7-09:00: the weekday must be from 0 (Monday) to 6 (Sunday)");
}

}  // namespace
}  // namespace ratelimit
