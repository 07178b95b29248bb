#pragma once

#include <algorithm>
#include <cstdint>

// How much the pipe moves per write when the user does not say: the engine's chunk and the size
// of a shared pipe's booking ahead.
namespace ratelimit::pipe {

// Writes per second at the default chunk size. Any 100 ms window then holds at most 21 writes
// worth, 1.05 times the rate; the cost is a wake-up every 5 ms, about 1 % of a core on the 2-core
// CI machine (bench/results/pipe.md, "cost while shaping").
inline constexpr double kWritesPerSecond = 200.0;

// The units per write for a rate: 1/kWritesPerSecond of it, at least one, at most `max_units`.
inline std::int64_t default_chunk_units(double units_per_second, std::int64_t max_units) {
  const double per_write = units_per_second / kWritesPerSecond;
  if (!(per_write < static_cast<double>(max_units))) return max_units;  // also +inf
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(per_write));
}

}  // namespace ratelimit::pipe
