#pragma once

#include <chrono>
#include <string_view>
#include <variant>

#include "format/quantities.hpp"

// Quantities as people write them on the command line: rates, sizes, durations and quotas, read
// into numbers (format/quantities.hpp writes them back). Each reader throws UsageError naming the
// bad value.
namespace ratelimit::format {

// What a rate or size was written in: plain units, or an explicit data unit.
enum class DataUnit { unspecified, bytes, bits };

// The rule for both rates and sizes (--rate, --burst, --chunk, every command): k, K, M, G, T are
// powers of 1000 and Ki, Mi, Gi, Ti of 1024; B (byte, bytes) is bytes and bit (bits) bits; "bps"
// and "Bps" are bits and bytes per second. A lone lowercase "b" is refused with a hint, since
// "5kb" is meant as kilobytes as often as kilobits.
struct Rate {
  double units_per_second;  // bits already converted to bytes
  DataUnit unit;
  bool binary_prefix = false;   // written with Ki, Mi, ...: shown back in powers of 1024
  double period_seconds = 0.0;  // the period written ("/15s", "/m", "ps"); 0: none
};

// "5000", "1.5M", "10MiB/s", "8Mbit/s", "8Mbps", "5MiBps", "10MB/sec", "2/s", "100/min",
// "300/15s", "1k/500ms"; "off" (any case) is no limit, an infinite rate.
Rate parse_rate(std::string_view text);
// How `rate` was written, to show rates and amounts of `counted` back alike.
Notation notation_of(const Rate& rate, Counted counted);

// A --quota: "at most `units` in any window of `period`", e.g. "50GB/d", "5000/h", "300/10m".
struct QuotaAmount {
  double units = 0.0;  // bits already converted to bytes
  std::chrono::nanoseconds period{0};
  DataUnit unit = DataUnit::unspecified;
};
QuotaAmount parse_quota(std::string_view text);

struct Amount {
  double units = 0.0;  // bits already converted to bytes
  DataUnit unit = DataUnit::unspecified;
  bool binary_prefix = false;
};
// "64k", "1MiB", "4096", "0", "8Mbit"; a count of units (bytes, lines or records).
Amount parse_size(std::string_view text);
// Whether `text` is written as a duration ("2s", "500ms", "1min"), not as an amount ("64k").
bool ends_in_time_unit(std::string_view text);
// "500ms", "10s", "2m", "1h", "1d", "1.5s"; a bare number is seconds.
std::chrono::nanoseconds parse_duration(std::string_view text);

// A value written as a time ("2s", "10ms") or as an amount ("64k", "0"), as --burst and --chunk
// take it.
using TimeOrAmount = std::variant<std::chrono::nanoseconds, Amount>;
TimeOrAmount parse_time_or_amount(std::string_view text);

}  // namespace ratelimit::format
