#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "pipe/engine.hpp"

namespace ratelimit::pipe {

// The words for a unit: "B"/"bytes", "lines", "records".
struct UnitNames {
  std::string short_name;  // after si_number(): "1.50 MB", "20 lines"
  std::string long_name;   // in the summary: "bytes", "lines"
};
UnitNames unit_names(const Unit& unit);

// How amounts and rates are shown: in the prefixes and data unit the user wrote the rate in
// (--rate 10MiB/s shows MiB/s, --rate 8Mbit/s shows Mbit/s).
struct Notation {
  bool binary_prefix = false;  // Ki, Mi, ... (powers of 1024) instead of k, M, ...
  bool bits = false;           // bytes shown as bits (byte mode only)
};

// "1.23 M" style: three significant digits with an SI prefix (k, M, G, T; powers of 1000, as
// the rates are written), or with binary_prefix an IEC one ("1.23 Mi").
std::string si_number(double value, bool binary_prefix = false);
// "0:01:05" (hours unbounded).
std::string clock_time(std::chrono::nanoseconds duration);

// The pv-like progress line: amount so far, elapsed time, current rate (over the last second),
// average rate, and with a known total size a bar, the percentage and the ETA. It fits in
// `width` columns less one (a line that reaches the last column wraps on many terminals, and
// each redraw then leaves a line behind): the bar shrinks first, then the average rate, the ETA
// and the elapsed time are left out.
class ProgressMeter {
 public:
  ProgressMeter(const Unit& unit, std::optional<std::uint64_t> total_bytes, Notation notation = {});
  std::string line(const Totals& totals, int width = 80);

 private:
  struct Sample {
    std::chrono::nanoseconds time;
    std::uint64_t units;
  };
  UnitNames names_;
  Notation notation_;
  std::optional<std::uint64_t> total_bytes_;
  std::deque<Sample> last_second_;
};

// One line for --stats: "ratelimit: 1048576 bytes in 5.003 s, 209.6 k/s (rate 209.7 k/s)".
std::string summary_text(const Result& result, const Unit& unit);
// The same as a JSON object on one line, with the rate changes at their wall-clock times (the
// engine's clock reads zero at `unix_time_at_clock_zero`); a rate of no limit is null.
std::string summary_json(const Result& result, const Unit& unit,
                         std::chrono::nanoseconds unix_time_at_clock_zero);

}  // namespace ratelimit::pipe
