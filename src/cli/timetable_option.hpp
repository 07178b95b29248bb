#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "ratelimit/timetable.hpp"

namespace ratelimit::cli {

// True when a --rate value is a timetable rather than one rate: its entries pair a time with a
// rate ("18:00,10M"), and a rate never holds a comma.
bool is_timetable(std::string_view text);

// "Mon-08:00,512k 18:00,10M Sat-00:00,off", as rclone writes its bandwidth timetable: entries
// [DAY-]HH:MM,RATE separated by spaces or semicolons; DAY is Mon..Sun or the full name, in any
// case; RATE is "off" (no limit) or what `rate_of` turns into units per second (it throws
// UsageError naming a rate that does not fit the command). Throws UsageError naming the entry and
// what is wrong with it; the entries themselves are checked by Timetable.
std::vector<TimetableEntry> parse_timetable(
    std::string_view text, const std::function<double(std::string_view rate)>& rate_of);

}  // namespace ratelimit::cli
