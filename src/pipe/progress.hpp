#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "format/quantities.hpp"
#include "pipe/engine.hpp"

namespace ratelimit::pipe {

// What `unit` counts: bytes, lines (records ended by newlines) or other records.
format::Counted counted(const Unit& unit);

// "0:01:05" (hours unbounded).
std::string clock_time(std::chrono::nanoseconds duration);

// The pv-like progress line: amount so far, elapsed time, current rate (over the last second),
// average rate, and with a known total (bytes, or the records counted ahead) a bar, the
// percentage and the ETA; every rate per the same period. It fits in `width` columns less three
// (room for a "^C" echoed after it, and the last column free): the bar shrinks first, then whole
// parts are left out, never cut.
class ProgressMeter {
 public:
  // Amounts in `notation`: the prefixes, data unit and period the user wrote the rate in (--rate
  // 10MiB/s shows MiB/s, --rate 8Mbit/s Mbit/s, --rate 30/m lines/m). `total_units`: what the
  // input holds in the units counted, if known.
  ProgressMeter(const format::Notation& notation, std::optional<std::uint64_t> total_units);
  std::string line(const Totals& totals, int width = 80);

 private:
  // The rate over about the last second, `totals` one more sample of it: the units since the
  // oldest sample kept, no older than needed to span a second.
  double rate_over_last_second(const Totals& totals);

  struct Sample {
    std::chrono::nanoseconds time;
    std::uint64_t units;
  };
  format::Notation notation_;
  std::optional<std::uint64_t> total_units_;
  std::deque<Sample> last_second_;
};

// One line for --stats, the average and the rate in `notation`:
// "ratelimit: 1048576 bytes in 5.003 s, 210 kB/s (rate 200kB/s; the first chunk is free)". The
// note says why an average is above the rate (Guava's first acquire is free). With quotas, how
// long they held the pipe, and a line for each: "ratelimit: quota 100000/2s: 60000 used in the
// window".
std::string summary_text(const Result& result, const format::Notation& notation);
// The same as a JSON object on one line, with the rate changes at their wall-clock times (the
// engine's clock reads zero at `unix_time_at_clock_zero`); a rate of no limit is null, its
// rate_text "off".
std::string summary_json(const Result& result, const format::Notation& notation,
                         std::chrono::nanoseconds unix_time_at_clock_zero);

}  // namespace ratelimit::pipe
