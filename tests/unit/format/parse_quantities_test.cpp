#include "format/parse_quantities.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string_view>
#include <utility>

#include "ratelimit/quota.hpp"
#include "usage_error.hpp"

namespace ratelimit::format {
namespace {

using namespace std::chrono_literals;

// Each text read as so many units per second.
void expect_rates(std::initializer_list<std::pair<std::string_view, double>> rates) {
  for (const auto& [text, per_second] : rates)
    EXPECT_EQ(parse_rate(text).units_per_second, per_second) << "reading '" << text << "'";
}

// Each text read as so many units.
void expect_sizes(std::initializer_list<std::pair<std::string_view, double>> sizes) {
  for (const auto& [text, units] : sizes)
    EXPECT_EQ(parse_size(text).units, units) << "reading '" << text << "'";
}

// Each text read by `parse` as counting that unit (bytes, bits, or not said).
template <typename Parse>
void expect_units(Parse parse, std::initializer_list<std::pair<std::string_view, DataUnit>> units) {
  for (const auto& [text, unit] : units)
    EXPECT_EQ(parse(text).unit, unit) << "reading '" << text << "'";
}

TEST(ParseRate, NumbersPrefixesUnitsPeriodsAndTheSpellingsPeopleType) {
  expect_rates({
      {"5000", 5000.0},
      {"0.5", 0.5},
      {"1.5M", 1.5e6},
      {"1k", 1000.0},
      {"10MiB/s", 10.0 * 1024 * 1024},
      {"8Mbit/s", 1e6},
      {"2/s", 2.0},
      {"120/m", 2.0},
      {"3600/h", 1.0},
      {"86400/d", 1.0},
      {"30/15s", 2.0},
      {"1k/500ms", 2000.0},
      {"1KiB", 1024.0},
      {"1e3", 1000.0},
      {"8Mbps", 1e6},
      {"5MiBps", 5.0 * 1024 * 1024},
      {"1kBps", 1000.0},
      {"10MB/sec", 1e7},
      {"16kbit/second", 2000.0},
      {"120/min", 2.0},
      {"7200/hour", 2.0},
      {"2bytes/s", 2.0},
      {"16bits", 2.0},
  });
  expect_units(parse_rate, {
                               {"10MiB/s", DataUnit::bytes},
                               {"8Mbit/s", DataUnit::bits},
                               {"2/s", DataUnit::unspecified},
                               {"8Mbps", DataUnit::bits},
                               {"5MiBps", DataUnit::bytes},
                           });
  EXPECT_FALSE(parse_rate("1MB").binary_prefix);
  EXPECT_TRUE(parse_rate("1MiB").binary_prefix);
}

TEST(ParseRate, RejectsWhatIsNotARateNamingIt) {
  expect_refusals(
      parse_rate,
      {
          {"abc", "invalid rate 'abc': expected a number"},
          {"", "invalid rate '': expected a number"},
          {"0", "invalid rate '0': must be more than zero"},
          {"-5", "invalid rate '-5': must not be negative"},
          {"5x",
           "invalid rate '5x': unknown unit 'x' (use k, M, G, T = 1000^n or Ki, Mi, Gi, Ti = "
           "1024^n; B or bit; /s, /m, /h, /d)"},
          {"5kb",
           "invalid rate '5kb': 'b' could mean bytes or bits: write 5kB for bytes or 5kbit for "
           "bits"},
          {"5Mb/s",
           "invalid rate '5Mb/s': 'b' could mean bytes or bits: write 5MB/s for bytes or 5Mbit/s "
           "for bits"},
          {"1e400", "invalid rate '1e400': too large"},
          {"1e-400", "invalid rate '1e-400': too small"},
          {"5bps/s",
           "invalid rate '5bps/s': unknown unit '/s' (use k, M, G, T = 1000^n or Ki, Mi, Gi, Ti = "
           "1024^n; B or bit; /s, /m, /h, /d)"},
          {"5/x", "invalid rate '5/x': unknown time unit 'x' (use ns, us, ms, s, m, h, d)"},
          {"5/0s", "invalid rate '5/0s': the period must be longer than zero"},
          {"5/15", "invalid rate '5/15': expected a period such as /s, /m or /15s"},
          {"inf", "invalid rate 'inf': expected a number"},
          {"nan", "invalid rate 'nan': expected a number"},
          {"1e308T", "invalid rate '1e308T': too large"},
      });
}

TEST(ParseSize, CountsWithPrefixes) {
  expect_sizes({
      {"0", 0.0},
      {"4096", 4096.0},
      {"64k", 64000.0},
      {"64KiB", 65536.0},
      {"1MB", 1e6},
      {"8Mbit", 1e6},
  });
  expect_units(parse_size, {{"1MB", DataUnit::bytes}, {"64k", DataUnit::unspecified}});
  expect_refusals(parse_size,
                  {
                      {"12q",
                       "invalid size '12q': unknown unit 'q' (use k, M, G, T = 1000^n or Ki, Mi, "
                       "Gi, Ti = 1024^n; B or bit)"},
                      {"5kb",
                       "invalid size '5kb': 'b' could mean bytes or bits: write 5kB for bytes or "
                       "5kbit for bits"},
                      {"5MBps", "invalid size '5MBps': a size is not per second (drop the 'ps')"},
                      {"-1", "invalid size '-1': must not be negative"},
                  });
}

// Every store counts exactly up to 2^53 - 1 (Redis in doubles): a quota beyond is refused.
TEST(Quota, TheAmountIsAtMostTheLargestExactCount) {
  EXPECT_EQ(parse_quota("9007199254740991/h").units, 9007199254740991.0);
  expect_refusals(
      parse_quota,
      {
          {"9007199254740992/h",
           "invalid quota '9007199254740992/h': the amount must be at most 9007199254740991 (2^53 "
           "- 1)"},
          {"9100T/d",
           "invalid quota '9100T/d': the amount must be at most 9007199254740991 (2^53 - 1)"},
      });
}

TEST(NotationOf, AsTheRateWasWritten) {
  EXPECT_EQ(notation_of(parse_rate("8Mbit/s"), Counted::bytes),
            (Notation{.counted = Counted::bytes, .bits = true, .period_seconds = 1}));
  EXPECT_EQ(notation_of(parse_rate("10MiB/s"), Counted::bytes),
            (Notation{.counted = Counted::bytes, .binary_prefix = true, .period_seconds = 1}));
  EXPECT_EQ(notation_of(parse_rate("20"), Counted::lines), (Notation{.counted = Counted::lines}));
  // The period as written: 1/10s is shown back as 1/10s, not 6/m; "ps" is per second.
  EXPECT_EQ(notation_of(parse_rate("1/10s"), Counted::lines),
            (Notation{.counted = Counted::lines, .period_seconds = 10}));
  EXPECT_EQ(notation_of(parse_rate("8Mbps"), Counted::bytes),
            (Notation{.counted = Counted::bytes, .bits = true, .period_seconds = 1}));
}

TEST(ParseDuration, UnitsAndBareSeconds) {
  EXPECT_EQ(parse_duration("500ms"), 500ms);
  EXPECT_EQ(parse_duration("10s"), 10s);
  EXPECT_EQ(parse_duration("2m"), 2min);
  EXPECT_EQ(parse_duration("1h"), 1h);
  EXPECT_EQ(parse_duration("1d"), 24h);
  EXPECT_EQ(parse_duration("1.5s"), 1500ms);
  EXPECT_EQ(parse_duration("2min"), 2min);
  EXPECT_TRUE(ends_in_time_unit("2min"));
  EXPECT_TRUE(ends_in_time_unit("500ms"));
  EXPECT_FALSE(ends_in_time_unit("5MB"));
  EXPECT_FALSE(ends_in_time_unit("64k"));
  EXPECT_EQ(parse_duration("3"), 3s);
  EXPECT_EQ(parse_duration("0"), 0s);
  expect_refusals(
      parse_duration,
      {
          {"10x", "invalid duration '10x': unknown time unit 'x' (use ns, us, ms, s, m, h, d)"},
          {"s", "invalid duration 's': expected a number"},
          {"1e12d", "invalid duration '1e12d': too long"},
      });
}

}  // namespace
}  // namespace ratelimit::format
