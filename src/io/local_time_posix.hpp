#pragma once

#include <chrono>

#include "ratelimit/timetable.hpp"

namespace ratelimit::io {

// Local time as the C library keeps it: the zone named by TZ, else the system's.
class LocalTimeZone final : public TimeZone {
 public:
  LocalTimeZone();
  std::chrono::seconds utc_offset(std::chrono::sys_seconds instant) const override;
};

}  // namespace ratelimit::io
