#include "format/retry_after.hpp"

#include <gtest/gtest.h>

namespace ratelimit::format {
namespace {

using namespace std::chrono_literals;

// Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example.
constexpr std::int64_t kExampleDate = 784111777;

TEST(RetryAfter, ReadsDelaySeconds) {
  EXPECT_EQ(retry_after_delay("30", 0), 30s);
  EXPECT_EQ(retry_after_delay(" 120\r\n", 0), 120s);
  EXPECT_EQ(retry_after_delay("0", 0), 0s);
}

TEST(RetryAfter, ReadsAnHttpDateFromNow) {
  EXPECT_EQ(retry_after_delay("Sun, 06 Nov 1994 08:49:37 GMT", kExampleDate - 30), 30s);
  EXPECT_EQ(retry_after_delay("Sun, 06 Nov 1994 08:49:37 GMT", kExampleDate + 5), 0s);
  EXPECT_EQ(retry_after_delay("Thu, 01 Jan 1970 00:00:10 GMT", 0), 10s);
}

TEST(RetryAfter, ReadsTheObsoleteDateForms) {
  // RFC 850 and asctime(), the same moment as RFC 9110's example.
  EXPECT_EQ(retry_after_delay("Sunday, 06-Nov-94 08:49:37 GMT", kExampleDate - 30), 30s);
  EXPECT_EQ(retry_after_delay("Sun Nov  6 08:49:37 1994", kExampleDate - 30), 30s);
  EXPECT_EQ(retry_after_delay("Sun Nov 06 08:49:37 1994", kExampleDate - 30), 30s);
  EXPECT_EQ(retry_after_delay("Thu Jan  1 00:00:10 1970", 0), 10s);
  EXPECT_EQ(retry_after_delay("Monday, 10-Jan-00 00:00:00 GMT", 947462400 - 7), 7s);
}

// Wed, 21 Oct 2026 07:28:00 GMT.
constexpr std::int64_t kIn2026 = 1792567680;

TEST(RetryAfter, ATwoDigitYearMoreThanFiftyYearsAheadIsInTheCenturyBefore) {
  // In 2026: "26" is this year (20 s ahead), "76" in 2076 (50 years ahead, not more), "77" and
  // "99" in the 1900s (past: no delay).
  EXPECT_EQ(retry_after_delay("Wednesday, 21-Oct-26 07:28:20 GMT", kIn2026), 20s);
  EXPECT_GT(retry_after_delay("Wednesday, 21-Oct-76 07:28:00 GMT", kIn2026), 49 * 365 * 24h);
  EXPECT_EQ(retry_after_delay("Thursday, 21-Oct-77 07:28:00 GMT", kIn2026), 0s);
  EXPECT_EQ(retry_after_delay("Thursday, 21-Oct-99 07:28:00 GMT", kIn2026), 0s);
  // Fifty years ahead to the second is not more than fifty years ahead; a second later is.
  EXPECT_GT(retry_after_delay("Wednesday, 21-Oct-76 07:28:00 GMT", kIn2026), 0s);
  EXPECT_EQ(retry_after_delay("Wednesday, 21-Oct-76 07:28:01 GMT", kIn2026), 0s);
}

TEST(RetryAfter, NothingIsNoDelay) {
  EXPECT_EQ(retry_after_delay("", 0), 0s);
  EXPECT_EQ(retry_after_delay(" \r\n", 0), 0s);
}

TEST(RetryAfter, RefusesAnythingElse) {
  for (const char* text : {"soon",
                           "-1",
                           "1.5",
                           "30s",
                           "Sun, 06 Nov 1994 08:49:37 UTC",
                           "Sun, 31 Feb 1994 08:49:37 GMT",
                           "Sun, 06 Nov 1994 24:49:37 GMT",
                           "Sun, 06-Nov-94 08:49:37 GMT",
                           "Sunday, 06-Nov-1994 08:49:37 GMT",
                           "Sunday, 06 Nov 94 08:49:37 GMT",
                           "Someday, 06-Nov-94 08:49:37 GMT",
                           "Sunday, 06-Nov-94 08:49:37 UTC",
                           "Sunday, 31-Nov-94 08:49:37 GMT",
                           "Sunday, 06-Nov-9x 08:49:37 GMT",
                           "Sun Nov 6 08:49:37 1994",
                           "Sunday Nov  6 08:49:37 1994",
                           "Sun Nov  6 08:49:37 94",
                           "Sun Nov  6 08:49:37 1994 GMT",
                           "Sun Nov  6 08:60:37 1994",
                           "Sun Nov 31 08:49:37 1994",
                           "Sun Nov  0 08:49:37 1994"})
    EXPECT_FALSE(retry_after_delay(text, 0)) << text;
}

TEST(RetryAfter, AHugeDelayIsACenturyAtMost) {
  const auto delay = retry_after_delay("99999999999999999999999", 0);
  ASSERT_TRUE(delay);
  EXPECT_LE(*delay, std::chrono::hours(24 * 366 * 100));
}

}  // namespace
}  // namespace ratelimit::format
