#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

// How much the pipe moves per write when the user does not give a size: the engine's chunk and
// the size of a shared pipe's booking ahead.
namespace ratelimit::pipe {

// The time between writes by default, in byte mode: any 100 ms window then holds at most one
// write, 1.08 times the rate, with 8 ms to spare for a late wake-up (the shaper's or its
// reader's); and it writes as often as pv does, since the wake-ups (the shaper's and its reader's)
// are most of the CPU that shaping costs (bench/results/cpu.md). `--chunk 10ms` is finer grained
// for ten times the wake-ups.
inline constexpr std::chrono::nanoseconds kDefaultByteWriteInterval =
    std::chrono::milliseconds(108);
// In record modes: a record is often a job for the next command (`| xargs -n1`), so up to 100
// records a second go one by one, evenly spaced, rather than in bunches.
inline constexpr std::chrono::nanoseconds kDefaultRecordWriteInterval =
    std::chrono::milliseconds(10);

inline std::chrono::nanoseconds default_write_interval(bool counts_bytes) {
  return counts_bytes ? kDefaultByteWriteInterval : kDefaultRecordWriteInterval;
}

// The units per write for a rate written every `interval`: at least one, at most `max_units`.
inline std::int64_t default_chunk_units(double units_per_second, std::int64_t max_units,
                                        std::chrono::nanoseconds interval) {
  // Divided last, so that whole rates and intervals give whole chunks (1000 B/s x 10 ms is 10).
  const double per_write = units_per_second * static_cast<double>(interval.count()) / 1e9;
  if (!(per_write < static_cast<double>(max_units))) return max_units;  // also +inf
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(per_write));
}

}  // namespace ratelimit::pipe
