#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

// How much the pipe moves per write when the user does not give a size: the engine's chunk and
// the size of a shared pipe's booking ahead.
namespace ratelimit::pipe {

// The time between writes by default. Any 100 ms window then holds at most 11 writes' worth,
// 1.10 times the rate, for a wake-up every 10 ms: the wake-ups are most of the CPU that shaping
// costs (bench/results/cpu.md). `--chunk 5ms` halves the window's excess for twice the wake-ups.
inline constexpr std::chrono::nanoseconds kDefaultWriteInterval = std::chrono::milliseconds(10);

// The units per write for a rate written every `interval`: at least one, at most `max_units`.
inline std::int64_t default_chunk_units(double units_per_second, std::int64_t max_units,
                                        std::chrono::nanoseconds interval = kDefaultWriteInterval) {
  // Divided last, so that whole rates and intervals give whole chunks (1000 B/s x 10 ms is 10).
  const double per_write = units_per_second * static_cast<double>(interval.count()) / 1e9;
  if (!(per_write < static_cast<double>(max_units))) return max_units;  // also +inf
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(per_write));
}

}  // namespace ratelimit::pipe
