#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/parse_quantities.hpp"
#include "ratelimit/timetable.hpp"

// Timetables as text: as people write them on the command line, and in the one form that keys,
// `ratelimit set` and `status` pass around.
namespace ratelimit::format {

// True when a --rate value is a timetable rather than one rate: its entries pair a time with a
// rate ("18:00,10M"), and a rate never holds a comma.
bool is_timetable(std::string_view text);

// One entry of a timetable as the command line gives it, with how its rate was written.
struct WrittenTimetableEntry {
  TimetableEntry entry;
  std::string text;       // the entry as written, e.g. "Mon-08:00,512k"
  std::string rate_text;  // its rate as written, e.g. "512k"
  DataUnit unit = DataUnit::unspecified;
};

// "Mon-08:00,512k 18:00,10M Sat-00:00,off", as rclone writes its bandwidth timetable: entries
// [DAY-[DAY-]]HH:MM,RATE separated by spaces or semicolons; DAY is Mon..Sun or the full name, in
// any case, and two of them a range of days ("Mon-Fri-09:00,1M", "Sat-Sun-00:00,off"); RATE is
// "off" (no limit) or what parse_rate() reads. Throws UsageError naming the entry and what is
// wrong with it; the entries together are checked by Timetable.
std::vector<WrittenTimetableEntry> parse_timetable(std::string_view text);

// The timetable in one form whatever way it was written, so that equal timetables have equal
// texts: the entries by day (every day first) and time, separated by ';', rates in units per
// second, e.g. "18:00,10000000;Mon-08:00,512000;Sat-00:00,off".
std::string timetable_text(const Timetable& timetable);
// The timetable of such a text; none if it is not one (a key written by something else).
std::optional<Timetable> parse_timetable_text(std::string_view text);

// One entry as timetable_text() writes it, with the rate as `rate_text` writes it ("off" stays).
std::string entry_text(const TimetableEntry& entry,
                       const std::function<std::string(double units_per_second)>& rate_text);

}  // namespace ratelimit::format
