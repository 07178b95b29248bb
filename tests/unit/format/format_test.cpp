#include <gtest/gtest.h>

#include <limits>

#include "format/escaping.hpp"
#include "format/json.hpp"
#include "format/quantities.hpp"

namespace ratelimit::format {
namespace {

using namespace std::chrono_literals;

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr Notation kBytes{.counted = Counted::bytes};
constexpr Notation kBits{.counted = Counted::bytes, .bits = true};
constexpr Notation kBinary{.counted = Counted::bytes, .binary_prefix = true};
constexpr Notation kLines{.counted = Counted::lines};

TEST(WrittenRate, AsUsersWriteThem) {
  EXPECT_EQ(written_rate(1.0 / 3600), "1/h");
  EXPECT_EQ(written_rate(100.0 / 60), "100/m");
  EXPECT_EQ(written_rate(1e9), "1G/s");
  EXPECT_EQ(written_rate(5000), "5k/s");
  EXPECT_EQ(written_rate(2), "2/s");
  EXPECT_EQ(written_rate(0.5), "30/m");
  EXPECT_EQ(written_rate(1.0 / 7), "8.571/m");
  EXPECT_EQ(written_rate(123456789), "123456789/s");
  EXPECT_EQ(written_rate(20, kLines), "20/s");
}

TEST(WrittenRate, InTheUnitAndPrefixesOfTheRate) {
  EXPECT_EQ(written_rate(50000, kBytes), "50kB/s");
  EXPECT_EQ(written_rate(10.0 * 1024 * 1024, kBytes), "10MiB/s");
  EXPECT_EQ(written_rate(1e6, kBits), "8Mbit/s");
  EXPECT_EQ(written_rate(1.0 / 3600, kBytes), "1B/h");
  // The prefix that writes it shortest, SI or IEC.
  EXPECT_EQ(written_rate(1536000, kBytes), "1536kB/s");
  EXPECT_EQ(written_rate(1.5 * 1024 * 1024, kBytes), "1.5MiB/s");
}

TEST(WrittenRate, PerThePeriodTheRateWasWrittenIn) {
  // --rate 1/10s is not "6/m", --rate 300/15s not "20B/s".
  EXPECT_EQ(written_rate(0.1, {.period_seconds = 10}), "1/10s");
  EXPECT_EQ(written_rate(20, {.counted = Counted::bytes, .period_seconds = 15}), "300B/15s");
  EXPECT_EQ(written_rate(100.0 / 60, {.period_seconds = 60}), "100/m");
  EXPECT_EQ(written_rate(2, {.period_seconds = 60}), "120/m");
  EXPECT_EQ(written_rate(0.15, {.period_seconds = 10}), "1.5/10s");
  // Less than one unit in that period: the period that fits.
  EXPECT_EQ(written_rate(1.0 / 3600, {.period_seconds = 1}), "1/h");
}

TEST(WrittenRate, WithWhatIsCounted) {
  EXPECT_EQ(rate_with_unit(100, kLines), "100 lines/s");
  EXPECT_EQ(rate_with_unit(1.0 / 3600, kLines), "1 line/h");
  EXPECT_EQ(rate_with_unit(1000, {.counted = Counted::records}), "1k records/s");
  EXPECT_EQ(rate_with_unit(5e6, kBytes), "5MB/s");
  EXPECT_EQ(rate_with_unit(kInfinity, kLines), "off");
}

TEST(WrittenBurst, InTheUnitItWasGivenIn) {
  EXPECT_EQ(written_burst(5.0 / 3, 3, {.burst_in_units = true}), "5");
  EXPECT_EQ(written_burst(5.0 / 3, 3, {}), "1.66667s");
  EXPECT_EQ(written_burst(2, 1000, {.counted = Counted::bytes, .burst_in_units = true}), "2kB");
  EXPECT_EQ(written_burst(0, 1000, {.burst_in_units = true}), "0");
}

TEST(WrittenRate, ReadableAtTheExtremes) {
  EXPECT_EQ(written_rate(kInfinity), "off");
  EXPECT_EQ(written_rate(kInfinity, kBits), "off");
  EXPECT_EQ(written_rate(1e300), "1e300/s");
  EXPECT_EQ(written_rate(1e300, kBytes), "1e300B/s");
  EXPECT_EQ(written_rate(1.234567891e17), "1.235e17/s");
  EXPECT_EQ(written_rate(1.5e13), "15T/s");
  EXPECT_EQ(written_rate(std::numeric_limits<double>::max()), "1.798e308/s");
  EXPECT_EQ(written_rate(1e-9), "8.64e-5/d");
  EXPECT_EQ(written_rate(std::numeric_limits<double>::denorm_min()), "4.269e-319/d");
}

TEST(WrittenQuota, InTheUnitOfTheRateAndTheLargestWholePeriod) {
  const Notation permits{};
  EXPECT_EQ(written_quota({.limit = 5000, .period = 1h}, permits), "5000/h");
  EXPECT_EQ(written_quota({.limit = 300, .period = 10min}, kLines), "300/10m");
  EXPECT_EQ(written_quota({.limit = 10, .period = 500ms}, kLines), "10/500ms");
  EXPECT_EQ(written_quota({.limit = 3, .period = 90s}, permits), "3/90s");
  EXPECT_EQ(written_quota({.limit = 1, .period = 1us}, permits), "1/us");
  EXPECT_EQ(written_quota({.limit = 1, .period = 1500ns}, permits), "1/1500ns");
  EXPECT_EQ(written_quota({.limit = 1'000'000'000, .period = 48h}, permits), "1000000000/2d");
  // Bytes with the prefix that writes them shortest, as a rate's; bits as the rate shows them.
  EXPECT_EQ(written_quota({.limit = 50'000'000'000, .period = 24h}, kBytes), "50GB/d");
  EXPECT_EQ(written_quota({.limit = 100'000, .period = 2s}, kBytes), "100kB/2s");
  EXPECT_EQ(written_quota({.limit = 1 << 20, .period = 1h}, kBinary), "1MiB/h");
  EXPECT_EQ(written_quota({.limit = 123'456'789, .period = 1h}, kBytes), "123456789B/h");
  EXPECT_EQ(written_quota({.limit = 50'000'000'000, .period = 24h}, kBits), "400Gbit/d");
}

TEST(NotationText, ReadsBackAsTheSameNotation) {
  const Notation notations[] = {
      {},
      kBits,
      {.counted = Counted::bytes, .binary_prefix = true, .period_seconds = 60.0},
      {.counted = Counted::lines, .period_seconds = 0.5, .burst_in_units = true},
      {.counted = Counted::records, .period_seconds = 86400.0}};
  for (const Notation& notation : notations)
    EXPECT_EQ(notation_of_text(notation_text(notation)), notation) << notation_text(notation);
  EXPECT_EQ(notation_text(kBinary), "bytes iec 0 time");
  EXPECT_EQ(notation_text({.counted = Counted::permits, .period_seconds = 1.0}),
            "permits si 1 time");
}

TEST(NotationText, AnythingElseIsNone) {
  for (const std::string_view text :
       {"", "bytes", "bytes si 1", "bytes si 1 time extra", "octets si 1 time", "bytes SI 1 time",
        "bytes si -1 time", "bytes si nan time", "bytes si inf time", "bytes si 1x time",
        "bytes si 1 seconds"})
    EXPECT_EQ(notation_of_text(text), std::nullopt) << text;
}

TEST(MeasuredAmount, ThreeSignificantDigits) {
  EXPECT_EQ(measured_amount(0, kBytes), "0 B");
  EXPECT_EQ(measured_amount(999, kBytes), "999 B");
  EXPECT_EQ(measured_amount(1234, kBytes), "1.23 kB");
  EXPECT_EQ(measured_amount(20000, kBytes), "20.0 kB");
  EXPECT_EQ(measured_amount(1.5e9, kBytes), "1.50 GB");
  EXPECT_EQ(measured_amount(10.0 * 1024 * 1024, kBinary), "10.0 MiB");
  EXPECT_EQ(measured_amount(1e6, kBits), "8.00 Mbit");
  EXPECT_EQ(measured_amount(20, kLines), "20 lines");
  EXPECT_EQ(measured_amount(1, kLines), "1 line");
  EXPECT_EQ(measured_amount(1, {.counted = Counted::records}), "1 record");
  EXPECT_EQ(measured_amount(1234, kLines), "1.23k lines");
  // Records are never bits.
  EXPECT_EQ(measured_amount(1000, {.counted = Counted::records, .bits = true}), "1.00k records");
}

TEST(MeasuredAmount, ReadableAtTheExtremes) {
  EXPECT_EQ(measured_amount(1e15, kBytes), "1.00e15 B");
  EXPECT_EQ(measured_amount(1e300, kBytes), "1.00e300 B");
  EXPECT_EQ(measured_amount(0.004, kBytes), "4.00e-3 B");
}

TEST(MeasuredRate, PerSecondOrTheFirstPeriodWithAWholeUnit) {
  EXPECT_EQ(measured_rate(1000, kBytes), "1.00 kB/s");
  EXPECT_EQ(measured_rate(0, kBytes), "0 B/s");
  EXPECT_EQ(measured_rate(1e6, kBits), "8.00 Mbit/s");
  EXPECT_EQ(measured_rate(0.5, kLines), "30 lines/m");
  EXPECT_EQ(measured_rate(1.0 / 3600, kBytes), "1 B/h");
  EXPECT_EQ(measured_rate(1e-9, kBytes), "8.64e-5 B/d");
  EXPECT_EQ(measured_rate(kInfinity, kBytes), "off");
  // Per the period the rate was written in, even where another would read shorter.
  EXPECT_EQ(measured_rate(0.5, {.counted = Counted::lines, .period_seconds = 1}), "0.50 lines/s");
  EXPECT_EQ(measured_rate(0, {.counted = Counted::lines, .period_seconds = 60}), "0 lines/m");
  EXPECT_EQ(measured_rate(0.4, {.counted = Counted::lines, .period_seconds = 10}), "4 lines/10s");
}

TEST(StoredCount, TwoDecimalsAndReadableBeyond) {
  EXPECT_EQ(stored_count(0), "0.00");
  EXPECT_EQ(stored_count(2), "2.00");
  EXPECT_EQ(stored_count(12345.678), "12345.68");
  EXPECT_EQ(stored_count(1e300), "1.00e300");
  EXPECT_EQ(stored_count(kInfinity), "unlimited");
}

TEST(HumanDuration, AsPeopleSayIt) {
  EXPECT_EQ(human_duration(0s), "0s");
  EXPECT_EQ(human_duration(250ms), "0.25s");
  EXPECT_EQ(human_duration(1500ms), "1.5s");
  EXPECT_EQ(human_duration(59s), "59s");
  EXPECT_EQ(human_duration(3599s), "59m59s");
  EXPECT_EQ(human_duration(2h), "2h");
  EXPECT_EQ(human_duration(76h), "3d4h");
  EXPECT_EQ(human_duration(std::chrono::duration<double>(1e9)), "31.7 years");
  EXPECT_EQ(human_duration(std::chrono::duration<double>(1e300)), "over 1000 years");
}

TEST(Escaping, Utf8IsTold) {
  EXPECT_TRUE(is_utf8(""));
  EXPECT_TRUE(is_utf8("plain"));
  EXPECT_TRUE(is_utf8("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_utf8("\xff"));
  EXPECT_FALSE(is_utf8("\xc0\xaf"));          // an overlong '/'
  EXPECT_FALSE(is_utf8("\xe0\x80\xaf"));      // another
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(is_utf8("\xe2\x82"));          // cut short
  EXPECT_FALSE(is_utf8("\xe2\x28\xa1"));      // not a continuation
}

TEST(Escaping, EveryByteShownAndReadBack) {
  EXPECT_EQ(escaped_bytes("bad\tkey\x01"), "bad\\x09key\\x01");
  EXPECT_EQ(escaped_bytes("a\\b\x7f"), "a\\x5cb\\x7f");
  EXPECT_EQ(escaped_bytes("\xff\xfe"
                          "caf\xc3\xa9"),
            "\\xff\\xfecaf\xc3\xa9");
  EXPECT_EQ(utf8_text("caf\xc3\xa9\t"), "caf\xc3\xa9\t");
  EXPECT_EQ(utf8_text("\xff"
                      "a"),
            "\\xffa");
  EXPECT_EQ(hex_bytes("a\xff\n"), "61ff0a");
}

TEST(Json, NumbersJsonCanCarry) {
  EXPECT_EQ(json_number(kInfinity).dump(), "null");
  EXPECT_EQ(json_number(std::numeric_limits<double>::quiet_NaN()).dump(), "null");
  EXPECT_EQ(json_number(1000.0).dump(), "1000");
  EXPECT_EQ(json_number(0.5).dump(), "0.5");
  EXPECT_EQ(json_number(1e300).dump(), "1e+300");
  EXPECT_EQ(json_number(2.0004, 3).dump(), "2");
  EXPECT_EQ(json_number(1.23456, 3).dump(), "1.235");
}

TEST(Json, TextOfAnyBytesIsValid) {
  const Json object = {{"key", json_text("\xff\xfe"
                                         "bad")}};
  EXPECT_EQ(object.dump(), R"({"key":"\\xff\\xfebad"})");
  EXPECT_EQ(Json(json_text("tab\there")).dump(), R"("tab\there")");
}

}  // namespace
}  // namespace ratelimit::format
