#include "format/timetable_text.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "usage_error.hpp"

namespace ratelimit::format {
namespace {

// The entries of a timetable as the command line gives it.
std::vector<TimetableEntry> parse(std::string_view text) {
  std::vector<TimetableEntry> entries;
  for (const WrittenTimetableEntry& written : parse_timetable(text))
    entries.push_back(written.entry);
  return entries;
}

TEST(TimetableText, OnlyTextWithAnEntryIsATimetable) {
  EXPECT_TRUE(is_timetable("18:00,10M"));
  EXPECT_TRUE(is_timetable("Mon-08:00,512k 18:00,10M"));
  EXPECT_FALSE(is_timetable("10MiB/s"));
  EXPECT_FALSE(is_timetable("300/15s"));
}

TEST(TimetableText, ReadsEntriesAsRcloneWritesThem) {
  const std::vector<TimetableEntry> entries = parse("Mon-08:00,512k 18:00,10M Sat-00:00,off");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0], (TimetableEntry{0, 8 * 60, 512e3}));
  EXPECT_EQ(entries[1], (TimetableEntry{std::nullopt, 18 * 60, 10e6}));
  EXPECT_EQ(entries[2], (TimetableEntry{5, 0, std::numeric_limits<double>::infinity()}));
}

TEST(TimetableText, FullDayNamesAnyCaseSemicolonsAndOneDigitHours) {
  const std::vector<TimetableEntry> entries =
      parse("  sunday-9:05,2/s;MONDAY-23:59,OFF ;  fri-00:00,1MiB/s ");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0], (TimetableEntry{6, 9 * 60 + 5, 2.0}));
  EXPECT_EQ(entries[1].weekday, 0);
  EXPECT_EQ(entries[1].minute_of_day, 23 * 60 + 59);
  EXPECT_EQ(entries[2], (TimetableEntry{4, 0, 1048576.0}));
}

TEST(TimetableText, ReadsAndWritesRangesOfDays) {
  const std::vector<TimetableEntry> entries = parse("Mon-Fri-09:00,1M sat-SUNDAY-00:00,off");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0], (TimetableEntry{0, 9 * 60, 1e6, 4}));
  EXPECT_EQ(entries[1], (TimetableEntry{5, 0, std::numeric_limits<double>::infinity(), 6}));
  const Timetable timetable(entries);
  EXPECT_EQ(timetable_text(timetable), "Mon-Fri-09:00,1e+06;Sat-Sun-00:00,off");
  const std::optional<Timetable> read = parse_timetable_text(timetable_text(timetable));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->entries(), entries);
  EXPECT_EQ(usage_error_of(parse_timetable, "Mon-Fun-09:00,1M"),
            "invalid timetable entry 'Mon-Fun-09:00,1M': unknown day 'Fun' (Mon..Sun, or the full "
            "name)");
}

TEST(TimetableText, ErrorsNameTheEntryAndTheProblem) {
  expect_refusals(
      parse_timetable,
      {
          {"Mon-08:00,1M 25:00,2M",
           "invalid timetable entry '25:00,2M': the hour must be from 0 to 23"},
          {"08:60,1M", "invalid timetable entry '08:60,1M': the minutes must be from 0 to 59"},
          {"Funday-08:00,1M",
           "invalid timetable entry 'Funday-08:00,1M': unknown day 'Funday' (Mon..Sun, or the full "
           "name)"},
          {"0800,1M", "invalid timetable entry '0800,1M': expected a time as HH:MM"},
          {"08:00,1M 09:00", "invalid timetable entry '09:00': expected [DAY-]HH:MM,RATE"},
          {"08:00,", "invalid timetable entry '08:00,': expected a rate or 'off' after the comma"},
          {"08:00,5x",
           "invalid timetable entry '08:00,5x': invalid rate '5x': unknown unit 'x' (use k, M, G, "
           "T = 1000^n or Ki, Mi, Gi, Ti = 1024^n; B or bit; /s, /m, /h, /d)"},
      });
}

TEST(TimetableText, OneFormWhateverTheWriting) {
  const Timetable written(parse("Sat-00:00,off  18:00,10M;mon-8:00,512k 07:30,1.5"));
  EXPECT_EQ(timetable_text(written), "07:30,1.5;18:00,1e+07;Mon-08:00,512000;Sat-00:00,off");
  const Timetable reordered(parse("monday-08:00,512000 18:00,1e7 Sat-00:00,OFF 7:30,1.5"));
  EXPECT_EQ(timetable_text(reordered), timetable_text(written));
}

TEST(TimetableText, ReadsBackWhatItWrites) {
  const Timetable timetable(
      parse("Sun-23:59,0.1 00:00,4.9e-324 Wed-12:00,off 06:00,123456789.125"));
  const std::optional<Timetable> read = parse_timetable_text(timetable_text(timetable));
  ASSERT_TRUE(read);
  EXPECT_EQ(timetable_text(*read), timetable_text(timetable));
  std::vector<TimetableEntry> expected = timetable.entries();
  std::vector<TimetableEntry> actual = read->entries();
  const auto by_time = [](const TimetableEntry& a, const TimetableEntry& b) {
    return std::pair(a.weekday.value_or(-1), a.minute_of_day) <
           std::pair(b.weekday.value_or(-1), b.minute_of_day);
  };
  std::sort(expected.begin(), expected.end(), by_time);
  std::sort(actual.begin(), actual.end(), by_time);
  EXPECT_EQ(actual, expected);
}

TEST(TimetableText, RefusesWhatItWouldNotWrite) {
  EXPECT_FALSE(parse_timetable_text(""));
  EXPECT_FALSE(parse_timetable_text("08:00,1M"));         // units are the command line's
  EXPECT_FALSE(parse_timetable_text("08:00,-5"));         // not a rate
  EXPECT_FALSE(parse_timetable_text("08:00,5 08:00,6"));  // the same time twice
  EXPECT_FALSE(parse_timetable_text("25:00,5"));
  EXPECT_TRUE(parse_timetable_text("08:00,5"));
}

TEST(TimetableText, EntryAsPeopleWriteIt) {
  const auto as_k = [](double rate) { return std::to_string(static_cast<int>(rate / 1000)) + "k"; };
  EXPECT_EQ(entry_text({0, 8 * 60, 512000.0}, as_k), "Mon-08:00,512k");
  EXPECT_EQ(entry_text({std::nullopt, 18 * 60 + 5, std::numeric_limits<double>::infinity()}, as_k),
            "18:05,off");
  EXPECT_EQ(entry_text({0, 9 * 60, 512000.0, 4}, as_k), "Mon-Fri-09:00,512k");
}

class Utc final : public TimeZone {
 public:
  std::chrono::seconds utc_offset(std::chrono::sys_seconds) const override { return {}; }
};

// The README's timetable example, as its reader copies it: the quoted --rate of the command after
// the comment that promises no limit over the weekend.
std::string readme_weekend_example() {
  std::ifstream readme(RATELIMIT_README);
  std::string line;
  while (std::getline(readme, line) &&
         line.find("no limit over the weekend") == std::string::npos) {
  }
  std::getline(readme, line);
  const std::size_t start = line.find("--rate \"") + 8;
  return line.substr(start, line.find('"', start) - start);
}

TEST(TimetableText, ReadmeExampleDoesWhatItsCommentSays) {
  using namespace std::chrono;
  const std::string text = readme_weekend_example();
  ASSERT_TRUE(is_timetable(text)) << "no timetable example found in the README: '" << text << "'";
  const Timetable timetable(parse(text));
  const auto rate_at = [&](sys_days day, hours hour) {
    return timetable.at(sys_seconds(day) + hour, Utc()).permits_per_second;
  };
  constexpr double kOff = std::numeric_limits<double>::infinity();
  const sys_days monday = 2026y / November / 30, wednesday = monday + days(2),
                 saturday = monday + days(5), sunday = monday + days(6);
  // "512 kB/s on Mondays from 08:00, 10 MB/s from Monday 18:00 through Friday, no limit over
  // the weekend"
  EXPECT_EQ(rate_at(monday, 10h), 512e3);
  EXPECT_EQ(rate_at(monday, 20h), 10e6);
  EXPECT_EQ(rate_at(wednesday, 10h), 10e6);
  EXPECT_EQ(rate_at(saturday, 1h), kOff);
  EXPECT_EQ(rate_at(saturday, 20h), kOff);
  EXPECT_EQ(rate_at(sunday, 20h), kOff);
  EXPECT_EQ(rate_at(monday + days(7), 7h), kOff);
}

}  // namespace
}  // namespace ratelimit::format
