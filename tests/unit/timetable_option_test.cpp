#include "cli/timetable_option.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "cli/units.hpp"

namespace ratelimit::cli {
namespace {

double rate_of(std::string_view text) { return parse_rate(text).units_per_second; }

std::string error_of(std::string_view text) {
  try {
    parse_timetable(text, rate_of);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "accepted";
}

TEST(TimetableOption, OnlyTextWithAnEntryIsATimetable) {
  EXPECT_TRUE(is_timetable("18:00,10M"));
  EXPECT_TRUE(is_timetable("Mon-08:00,512k 18:00,10M"));
  EXPECT_FALSE(is_timetable("10MiB/s"));
  EXPECT_FALSE(is_timetable("300/15s"));
}

TEST(TimetableOption, ReadsEntriesAsRcloneWritesThem) {
  const std::vector<TimetableEntry> entries =
      parse_timetable("Mon-08:00,512k 18:00,10M Sat-00:00,off", rate_of);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0], (TimetableEntry{0, 8 * 60, 512e3}));
  EXPECT_EQ(entries[1], (TimetableEntry{std::nullopt, 18 * 60, 10e6}));
  EXPECT_EQ(entries[2], (TimetableEntry{5, 0, std::numeric_limits<double>::infinity()}));
}

TEST(TimetableOption, FullDayNamesAnyCaseSemicolonsAndOneDigitHours) {
  const std::vector<TimetableEntry> entries =
      parse_timetable("  sunday-9:05,2/s;MONDAY-23:59,OFF ;  fri-00:00,1MiB/s ", rate_of);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0], (TimetableEntry{6, 9 * 60 + 5, 2.0}));
  EXPECT_EQ(entries[1].weekday, 0);
  EXPECT_EQ(entries[1].minute_of_day, 23 * 60 + 59);
  EXPECT_EQ(entries[2], (TimetableEntry{4, 0, 1048576.0}));
}

TEST(TimetableOption, ErrorsNameTheEntryAndTheProblem) {
  EXPECT_EQ(error_of("Mon-08:00,1M 25:00,2M"),
            "invalid timetable entry '25:00,2M': the hour must be from 0 to 23");
  EXPECT_EQ(error_of("08:60,1M"),
            "invalid timetable entry '08:60,1M': the minutes must be from 0 to 59");
  EXPECT_EQ(error_of("Funday-08:00,1M"),
            "invalid timetable entry 'Funday-08:00,1M': unknown day 'Funday' (Mon..Sun, or the "
            "full name)");
  EXPECT_EQ(error_of("0800,1M"), "invalid timetable entry '0800,1M': expected a time as HH:MM");
  EXPECT_EQ(error_of("08:00,1M 09:00"),
            "invalid timetable entry '09:00': expected [DAY-]HH:MM,RATE");
  EXPECT_EQ(error_of("08:00,"),
            "invalid timetable entry '08:00,': expected a rate or 'off' after the comma");
  EXPECT_EQ(error_of("08:00,5x"),
            "invalid timetable entry '08:00,5x': invalid rate '5x': unknown unit 'x' (use k, M, G, "
            "T = 1000^n or Ki, Mi, Gi, Ti = 1024^n; B or bit; /s, /m, /h, /d)");
}

}  // namespace
}  // namespace ratelimit::cli
