#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "ratelimit/quota.hpp"

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
  // The period the rate was written per, in seconds ("/m": 60, "/15s": 15, "Mbps": 1), which every
  // rate is then shown per; 0: none written, each rate is shown per the shortest period in which
  // it counts a whole unit.
  double period_seconds = 0.0;
  // A burst was written as an amount ("5", "64k"), not as a time ("2s"), and is shown so.
  bool burst_in_units = false;
  friend bool operator==(const Notation&, const Notation&) = default;
};

// A notation as one line of text, as a shared key keeps it beside its parameters: what is counted
// ("bytes", "bits", "lines", "records", "permits"), the prefixes ("si", "iec"), the period in
// seconds (0: none) and how a burst was written ("time", "units"), e.g. "bytes si 1 time".
std::string notation_text(const Notation& notation);
// The notation of such a text; none if it is not one (a key kept by a later version).
std::optional<Notation> notation_of_text(std::string_view text);

// "bytes", "lines", "records" or "permits"; "line" and the like for a count of one.
std::string_view counted_name(Counted counted, double count = 0.0);

// The period a rate is shown per when none was written: the shortest of a second, a minute, an
// hour and a day in which it counts a whole unit (a day at the slowest), in seconds.
double natural_period(double units_per_second);

// A rate as it is written to --rate, and read back by it as the same rate: "2/s", "5k/s",
// "50kB/s", "10MiB/s", "8Mbit/s", "100/m", "1/h", "1/10s", "1e300/s"; "off" for no limit
// (infinity). The period is the notation's when it counts at least one unit in it, else the
// shortest that makes the count whole; the prefix the one that writes it shortest; a count no
// prefix writes exactly has four significant digits ("8.571/m").
std::string written_rate(double units_per_second, const Notation& notation = {});
// The same with what is counted when that is not bytes: "100 lines/s", "1 record/h", "5MB/s".
std::string rate_with_unit(double units_per_second, const Notation& notation);

// A bucket's burst as it was written: as an amount at `units_per_second` ("5", "64kB") when the
// notation says so, else as a time ("1.5s").
std::string written_burst(double burst_seconds, double units_per_second, const Notation& notation);

// A measured amount to three significant digits: "1.23 MB", "8.04 Mbit", "20 lines",
// "1.23k lines", "0 B"; beyond the largest prefix "1.00e15 B".
std::string measured_amount(double units, const Notation& notation);
// A measured rate the same way, per the notation's period ("1.23 MB/s", "4.00 lines/10s"), or
// without one per second, or below one unit a second per minute, hour or day ("30 lines/m",
// "1.50 B/h"); "off" for infinity.
std::string measured_rate(double units_per_second, const Notation& notation);

// A quota as --quota reads it, in the notation's unit: "5000/h", "300/10m", "10/500ms"; bytes with
// the prefix that writes them shortest, as a written rate's: "50GB/d", "100kB/2s", "1MiB/h",
// "400Gbit/d". The period in the largest unit that counts it whole, without a count of one.
std::string written_quota(const QuotaParams& quota, const Notation& notation);

// A count of permits kept in a bucket: two decimals ("0.50", "12345.00"), in exponent notation
// from a billion on ("1.00e300"); "unlimited" for infinity (a bucket under "off").
std::string stored_count(double permits);

// A wait as people say it: "0.25s", "1.5s", "59m59s", "2h", "3d4h", "31.7 years".
std::string human_duration(std::chrono::duration<double> duration);

}  // namespace ratelimit::format
