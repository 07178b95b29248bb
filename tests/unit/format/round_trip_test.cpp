// What format/ writes for people to type again reads back as the value written:
// parse(written(x)) == x for rates, sizes, durations, quotas and timetables.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "format/parse_quantities.hpp"
#include "format/quantities.hpp"
#include "format/timetable_text.hpp"
#include "ratelimit/quota.hpp"
#include "ratelimit/timetable.hpp"

namespace ratelimit::format {
namespace {

using namespace std::chrono_literals;

constexpr double kOff = std::numeric_limits<double>::infinity();

// The ways a rate is written: counted, in SI or IEC prefixes, in bits, per a period.
const Notation kNotations[] = {{},
                               {.counted = Counted::lines},
                               {.counted = Counted::bytes},
                               {.counted = Counted::bytes, .binary_prefix = true},
                               {.counted = Counted::bytes, .bits = true},
                               {.counted = Counted::bytes, .period_seconds = 60},
                               {.period_seconds = 15}};

TEST(RoundTrip, RatesExactlyWhereAPrefixWritesThemExactly) {
  for (const Notation& notation : kNotations) {
    for (const double rate : {1.0 / 3600, 2.0, 1536.0, 5000.0, 0.5, 123456789.0, 1e9,
                              10.0 * 1024 * 1024, 1e300, kOff}) {
      const std::string text = written_rate(rate, notation);
      EXPECT_EQ(parse_rate(text).units_per_second, rate) << text;
    }
  }
}

TEST(RoundTrip, RatesOfFourDigitsToTheirPrecision) {
  for (const Notation& notation : kNotations) {
    for (const double rate : {1.0 / 7, 100.0 / 60, 1.0 / 3}) {
      const std::string text = written_rate(rate, notation);
      EXPECT_NEAR(parse_rate(text).units_per_second, rate, 5e-4 * rate) << text;
    }
  }
}

// The period and the data unit are kept; the prefix is the one that writes the rate shortest.
TEST(RoundTrip, RatesKeepThePeriodAndUnitTheyWereWrittenIn) {
  for (const Notation& notation : kNotations) {
    if (notation.period_seconds == 0.0) continue;  // without a period one is chosen
    const std::string text = written_rate(1536.0, notation);
    const Notation read = notation_of(parse_rate(text), notation.counted);
    EXPECT_EQ(read.period_seconds, notation.period_seconds) << text;
    EXPECT_EQ(read.bits, notation.bits) << text;
  }
}

TEST(RoundTrip, SizesAsABurstIsWrittenInUnits) {
  for (const Notation& written_in : kNotations) {
    Notation notation = written_in;
    notation.burst_in_units = true;
    for (const double units : {0.0, 5.0, 1000.0, 1536.0, 65536.0, 1e6, 123456789.0}) {
      const std::string text = written_burst(units / 1000.0, 1000.0, notation);
      EXPECT_EQ(parse_size(text).units, units) << text;
    }
  }
}

TEST(RoundTrip, DurationsAsAWaitIsWritten) {
  for (const std::chrono::nanoseconds duration : std::initializer_list<std::chrono::nanoseconds>{
           0ns, 1ms, 250ms, 1500ms, 59999ms, 1min, 2min, 1h, 24h, 3 * 24h}) {
    const std::string text = human_duration(duration);
    EXPECT_EQ(parse_duration(text), duration) << text;
  }
}

TEST(RoundTrip, DurationsAsABurstIsWrittenInTime) {
  for (const double seconds : {0.0, 0.001, 0.25, 1.0, 1.5, 2.0, 60.0, 3600.0}) {
    const std::string text = written_burst(seconds, 1000.0, {});
    EXPECT_EQ(parse_duration(text), std::chrono::duration<double>(seconds)) << text;
  }
}

TEST(RoundTrip, Quotas) {
  const Notation kinds[] = {{},
                            {.counted = Counted::bytes},
                            {.counted = Counted::bytes, .binary_prefix = true},
                            {.counted = Counted::bytes, .bits = true}};
  for (const std::int64_t limit : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{1536},
                                   std::int64_t{123456789}, kLargestExactCount}) {
    for (const std::chrono::nanoseconds period : std::initializer_list<std::chrono::nanoseconds>{
             1us, 1500ns, 500ms, 90s, 10min, 2h, 24h, 3653 * 24h}) {
      for (const Notation& notation : kinds) {
        const std::string text = written_quota({.limit = limit, .period = period}, notation);
        const QuotaAmount read = parse_quota(text);
        EXPECT_EQ(read.units, static_cast<double>(limit)) << text;
        EXPECT_EQ(read.period, period) << text;
      }
    }
  }
}

const std::vector<TimetableEntry> kTimetable{{0, 8 * 60, 512e3},
                                             {std::nullopt, 18 * 60, 10e6},
                                             {5, 0, kOff, 6},
                                             {0, 9 * 60 + 5, 1.0 / 3600, 4},
                                             {3, 23 * 60 + 59, 10.0 * 1024 * 1024}};

TEST(RoundTrip, TimetablesInTheFormKeysKeep) {
  const Timetable timetable(kTimetable);
  const std::optional<Timetable> read = parse_timetable_text(timetable_text(timetable));
  ASSERT_TRUE(read);
  EXPECT_EQ(timetable_text(*read), timetable_text(timetable));
  const Timetable by_time(read->entries());
  EXPECT_EQ(by_time.entries().size(), kTimetable.size());
  for (const TimetableEntry& entry : kTimetable)
    EXPECT_NE(std::find(read->entries().begin(), read->entries().end(), entry),
              read->entries().end())
        << timetable_text(timetable);
}

TEST(RoundTrip, TimetablesAsStatusWritesTheirEntries) {
  for (const Notation& notation : kNotations) {
    std::string text;
    for (const TimetableEntry& entry : kTimetable)
      text += entry_text(entry, [&](double rate) { return written_rate(rate, notation); }) + " ";
    std::vector<TimetableEntry> read;
    for (const WrittenTimetableEntry& written : parse_timetable(text))
      read.push_back(written.entry);
    EXPECT_EQ(read, kTimetable) << text;
  }
}

}  // namespace
}  // namespace ratelimit::format
