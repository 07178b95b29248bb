#pragma once

#include <variant>

#include "ratelimit/timetable.hpp"

namespace ratelimit::control {

// What `ratelimit set` sent: one rate (units per second), or a timetable to follow from now on.
using NewRate = std::variant<double, Timetable>;

}  // namespace ratelimit::control
