#include "io/local_time_posix.hpp"

#include <ctime>

namespace ratelimit::io {

LocalTimeZone::LocalTimeZone() { ::tzset(); }

std::chrono::seconds LocalTimeZone::utc_offset(std::chrono::sys_seconds instant) const {
  const std::time_t time = static_cast<std::time_t>(instant.time_since_epoch().count());
  std::tm local{};
  // An instant the C library cannot represent in local time: treat the zone as UTC there.
  if (::localtime_r(&time, &local) == nullptr) return std::chrono::seconds::zero();
  return std::chrono::seconds(local.tm_gmtoff);
}

}  // namespace ratelimit::io
