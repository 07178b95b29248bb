#include "format/parse_quantities.hpp"

#include <gtest/gtest.h>

#include "ratelimit/quota.hpp"
#include "usage_error.hpp"

namespace ratelimit::format {
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
  EXPECT_FALSE(parse_rate("1MB").binary_prefix);
  EXPECT_TRUE(parse_rate("1MiB").binary_prefix);
}

TEST(ParseRate, SpellingsPeopleType) {
  EXPECT_EQ(parse_rate("8Mbps").units_per_second, 1e6);
  EXPECT_EQ(parse_rate("8Mbps").unit, DataUnit::bits);
  EXPECT_EQ(parse_rate("5MiBps").units_per_second, 5.0 * 1024 * 1024);
  EXPECT_EQ(parse_rate("5MiBps").unit, DataUnit::bytes);
  EXPECT_EQ(parse_rate("1kBps").units_per_second, 1000.0);
  EXPECT_EQ(parse_rate("10MB/sec").units_per_second, 1e7);
  EXPECT_EQ(parse_rate("16kbit/second").units_per_second, 2000.0);
  EXPECT_EQ(parse_rate("120/min").units_per_second, 2.0);
  EXPECT_EQ(parse_rate("7200/hour").units_per_second, 2.0);
  EXPECT_EQ(parse_rate("2bytes/s").units_per_second, 2.0);
  EXPECT_EQ(parse_rate("16bits").units_per_second, 2.0);
}

TEST(ParseRate, RejectsWhatIsNotARateNamingIt) {
  EXPECT_EQ(usage_error_of(parse_rate, "abc"), "invalid rate 'abc': expected a number");
  EXPECT_EQ(usage_error_of(parse_rate, ""), "invalid rate '': expected a number");
  EXPECT_EQ(usage_error_of(parse_rate, "0"), "invalid rate '0': must be more than zero");
  EXPECT_EQ(usage_error_of(parse_rate, "-5"), "invalid rate '-5': must not be negative");
  EXPECT_EQ(usage_error_of(parse_rate, "5x"),
            "invalid rate '5x': unknown unit 'x' (use k, M, G, T = 1000^n or Ki, Mi, Gi, Ti = "
            "1024^n; B or bit; /s, /m, /h, /d)");
  EXPECT_EQ(usage_error_of(parse_rate, "5kb"),
            "invalid rate '5kb': 'b' could mean bytes or bits: write 5kB for bytes or 5kbit for "
            "bits");
  EXPECT_EQ(usage_error_of(parse_rate, "5Mb/s"),
            "invalid rate '5Mb/s': 'b' could mean bytes or bits: write 5MB/s for bytes or "
            "5Mbit/s for bits");
  EXPECT_EQ(usage_error_of(parse_rate, "1e400"), "invalid rate '1e400': too large");
  EXPECT_EQ(usage_error_of(parse_rate, "1e-400"), "invalid rate '1e-400': too small");
  EXPECT_EQ(usage_error_of(parse_rate, "5bps/s"),
            "invalid rate '5bps/s': unknown unit '/s' (use k, M, G, T = 1000^n or Ki, Mi, Gi, "
            "Ti = 1024^n; B or bit; /s, /m, /h, /d)");
  EXPECT_EQ(usage_error_of(parse_rate, "5/x"),
            "invalid rate '5/x': unknown time unit 'x' (use ns, us, ms, s, m, h, d)");
  EXPECT_EQ(usage_error_of(parse_rate, "5/0s"),
            "invalid rate '5/0s': the period must be longer than zero");
  EXPECT_EQ(usage_error_of(parse_rate, "5/15"),
            "invalid rate '5/15': expected a period such as /s, /m or /15s");
  EXPECT_EQ(usage_error_of(parse_rate, "inf"), "invalid rate 'inf': expected a number");
  EXPECT_EQ(usage_error_of(parse_rate, "nan"), "invalid rate 'nan': expected a number");
  EXPECT_EQ(usage_error_of(parse_rate, "1e308T"), "invalid rate '1e308T': too large");
}

TEST(ParseSize, CountsWithPrefixes) {
  EXPECT_EQ(parse_size("0").units, 0.0);
  EXPECT_EQ(parse_size("4096").units, 4096.0);
  EXPECT_EQ(parse_size("64k").units, 64000.0);
  EXPECT_EQ(parse_size("64KiB").units, 65536.0);
  EXPECT_EQ(parse_size("1MB").units, 1e6);
  EXPECT_EQ(parse_size("1MB").unit, DataUnit::bytes);
  EXPECT_EQ(parse_size("8Mbit").units, 1e6);
  EXPECT_EQ(parse_size("64k").unit, DataUnit::unspecified);
  EXPECT_EQ(usage_error_of(parse_size, "12q"),
            "invalid size '12q': unknown unit 'q' (use k, M, G, T = 1000^n or Ki, Mi, Gi, Ti = "
            "1024^n; B or bit)");
  EXPECT_EQ(usage_error_of(parse_size, "5kb"),
            "invalid size '5kb': 'b' could mean bytes or bits: write 5kB for bytes or 5kbit for "
            "bits");
  EXPECT_EQ(usage_error_of(parse_size, "5MBps"),
            "invalid size '5MBps': a size is not per second (drop the 'ps')");
  EXPECT_EQ(usage_error_of(parse_size, "-1"), "invalid size '-1': must not be negative");
}

// Every store counts exactly up to 2^53 - 1 (Redis in doubles): a quota beyond is refused.
TEST(Quota, TheAmountIsAtMostTheLargestExactCount) {
  EXPECT_EQ(parse_quota("9007199254740991/h").units, 9007199254740991.0);
  EXPECT_EQ(usage_error_of(parse_quota, "9007199254740992/h"),
            "invalid quota '9007199254740992/h': the amount must be at most 9007199254740991 "
            "(2^53 - 1)");
  EXPECT_EQ(usage_error_of(parse_quota, "9100T/d"),
            "invalid quota '9100T/d': the amount must be at most 9007199254740991 (2^53 - 1)");
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
  EXPECT_EQ(usage_error_of(parse_duration, "10x"),
            "invalid duration '10x': unknown time unit 'x' (use ns, us, ms, s, m, h, d)");
  EXPECT_EQ(usage_error_of(parse_duration, "s"), "invalid duration 's': expected a number");
  EXPECT_EQ(usage_error_of(parse_duration, "1e12d"), "invalid duration '1e12d': too long");
}

}  // namespace
}  // namespace ratelimit::format
