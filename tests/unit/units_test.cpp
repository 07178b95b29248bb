#include "cli/units.hpp"

#include <gtest/gtest.h>

namespace ratelimit::cli {
namespace {

using namespace std::chrono_literals;

TEST(ParseRate, NumbersPrefixesUnitsAndPeriods) {
  EXPECT_EQ(parse_rate("5000").units_per_second, 5000.0);
  EXPECT_EQ(parse_rate("0.5").units_per_second, 0.5);
  EXPECT_EQ(parse_rate("1.5M").units_per_second, 1.5e6);
  EXPECT_EQ(parse_rate("1k").units_per_second, 1000.0);
  EXPECT_EQ(parse_rate("10MiB/s").units_per_second, 10.0 * 1024 * 1024);
  EXPECT_EQ(parse_rate("10MiB/s").unit, DataUnit::bytes);
  EXPECT_EQ(parse_rate("8Mbit/s").units_per_second, 1e6);
  EXPECT_EQ(parse_rate("8Mbit/s").unit, DataUnit::bits);
  EXPECT_EQ(parse_rate("2/s").units_per_second, 2.0);
  EXPECT_EQ(parse_rate("2/s").unit, DataUnit::unspecified);
  EXPECT_EQ(parse_rate("120/m").units_per_second, 2.0);
  EXPECT_EQ(parse_rate("3600/h").units_per_second, 1.0);
  EXPECT_EQ(parse_rate("86400/d").units_per_second, 1.0);
  EXPECT_EQ(parse_rate("30/15s").units_per_second, 2.0);
  EXPECT_EQ(parse_rate("1k/500ms").units_per_second, 2000.0);
  EXPECT_EQ(parse_rate("1KiB").units_per_second, 1024.0);
  EXPECT_EQ(parse_rate("1e3").units_per_second, 1000.0);
}

std::string error_of(auto parse, std::string_view text) {
  try {
    parse(text);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "accepted";
}

TEST(ParseRate, RejectsWhatIsNotARateNamingIt) {
  EXPECT_EQ(error_of(parse_rate, "abc"), "invalid rate 'abc': expected a number");
  EXPECT_EQ(error_of(parse_rate, ""), "invalid rate '': expected a number");
  EXPECT_EQ(error_of(parse_rate, "0"), "invalid rate '0': must be more than zero");
  EXPECT_EQ(error_of(parse_rate, "-5"), "invalid rate '-5': must not be negative");
  EXPECT_EQ(error_of(parse_rate, "5x"), "invalid rate '5x': unknown unit 'x'");
  EXPECT_EQ(error_of(parse_rate, "5/x"),
            "invalid rate '5/x': unknown time unit 'x' (use ns, us, ms, s, m, h, d)");
  EXPECT_EQ(error_of(parse_rate, "5/0s"),
            "invalid rate '5/0s': the period must be longer than zero");
  EXPECT_EQ(error_of(parse_rate, "5/15"),
            "invalid rate '5/15': expected a period such as /s, /m or /15s");
  EXPECT_EQ(error_of(parse_rate, "inf"), "invalid rate 'inf': expected a number");
  EXPECT_EQ(error_of(parse_rate, "nan"), "invalid rate 'nan': expected a number");
  EXPECT_EQ(error_of(parse_rate, "1e308T"), "invalid rate '1e308T': too large");
}

TEST(ParseSize, CountsWithPrefixes) {
  EXPECT_EQ(parse_size("0"), 0.0);
  EXPECT_EQ(parse_size("4096"), 4096.0);
  EXPECT_EQ(parse_size("64k"), 64000.0);
  EXPECT_EQ(parse_size("64KiB"), 65536.0);
  EXPECT_EQ(parse_size("1MB"), 1e6);
  EXPECT_EQ(error_of(parse_size, "12q"), "invalid size '12q': unknown unit 'q'");
  EXPECT_EQ(error_of(parse_size, "-1"), "invalid size '-1': must not be negative");
}

TEST(ParseDuration, UnitsAndBareSeconds) {
  EXPECT_EQ(parse_duration("500ms"), 500ms);
  EXPECT_EQ(parse_duration("10s"), 10s);
  EXPECT_EQ(parse_duration("2m"), 2min);
  EXPECT_EQ(parse_duration("1h"), 1h);
  EXPECT_EQ(parse_duration("1d"), 24h);
  EXPECT_EQ(parse_duration("1.5s"), 1500ms);
  EXPECT_EQ(parse_duration("3"), 3s);
  EXPECT_EQ(parse_duration("0"), 0s);
  EXPECT_EQ(error_of(parse_duration, "10x"),
            "invalid duration '10x': unknown time unit 'x' (use ns, us, ms, s, m, h, d)");
  EXPECT_EQ(error_of(parse_duration, "s"), "invalid duration 's': expected a number");
  EXPECT_EQ(error_of(parse_duration, "1e12d"), "invalid duration '1e12d': too long");
}

}  // namespace
}  // namespace ratelimit::cli
