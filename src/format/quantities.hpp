#pragma once

#include <chrono>
#include <string>
#include <string_view>

// How numbers are shown to people: rates and amounts in the notation the rate was written in,
// and durations. The one place for this, used by the progress line, --stats, status and the
// notices; strings only, no I/O.
namespace ratelimit::format {

// What a rate counts.
enum class Counted { permits, bytes, lines, records };

// How a rate was written, so that rates and amounts are shown back alike.
struct Notation {
  Counted counted = Counted::permits;
  // Measured amounts in Ki, Mi, ... (powers of 1024) instead of k, M, ...; a written rate takes
  // whichever prefix writes it shortest.
  bool binary_prefix = false;
  bool bits = false;  // bytes shown as bits (bytes only)
  friend bool operator==(const Notation&, const Notation&) = default;
};

// "bytes", "lines", "records" or "permits".
std::string_view counted_name(Counted counted);

// A rate as it is written to --rate, and read back by it as the same rate: "2/s", "5k/s",
// "50kB/s", "10MiB/s", "8Mbit/s", "100/m", "1/h", "1e300/s"; "off" for no limit (infinity). The
// period is the shortest that makes the count whole, the prefix the one that writes it shortest;
// a count no prefix writes exactly has four significant digits ("8.571/m").
std::string written_rate(double units_per_second, const Notation& notation = {});

// A measured amount to three significant digits: "1.23 MB", "8.04 Mbit", "20 lines",
// "1.23k lines", "0 B"; beyond the largest prefix "1.00e15 B".
std::string measured_amount(double units, const Notation& notation);
// A measured rate the same way, per second, or below one unit a second per minute, hour or day
// ("1.23 MB/s", "30 lines/m", "1.50 B/h"); "off" for infinity.
std::string measured_rate(double units_per_second, const Notation& notation);

// A count of permits kept in a bucket: two decimals ("0.50", "12345.00"), in exponent notation
// from a billion on ("1.00e300"); "unlimited" for infinity (a bucket under "off").
std::string stored_count(double permits);

// A wait as people say it: "0.25s", "1.5s", "59m59s", "2h", "3d4h", "31.7 years".
std::string human_duration(std::chrono::duration<double> duration);

}  // namespace ratelimit::format
