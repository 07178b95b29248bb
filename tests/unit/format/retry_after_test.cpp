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

TEST(RetryAfter, NothingIsNoDelay) {
  EXPECT_EQ(retry_after_delay("", 0), 0s);
  EXPECT_EQ(retry_after_delay(" \r\n", 0), 0s);
}

TEST(RetryAfter, RefusesAnythingElse) {
  for (const char* text : {"soon", "-1", "1.5", "30s", "Sun, 06 Nov 1994 08:49:37 UTC",
                           "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT",
                           "Sunday, 06-Nov-94 08:49:37 GMT"})
    EXPECT_FALSE(retry_after_delay(text, 0)) << text;
}

TEST(RetryAfter, AHugeDelayIsACenturyAtMost) {
  const auto delay = retry_after_delay("99999999999999999999999", 0);
  ASSERT_TRUE(delay);
  EXPECT_LE(*delay, std::chrono::hours(24 * 366 * 100));
}

}  // namespace
}  // namespace ratelimit::format
