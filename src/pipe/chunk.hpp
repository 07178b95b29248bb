#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

// How much the pipe moves per write when the user does not give a size: the engine's chunk and
// the size of a shared pipe's booking ahead.
namespace ratelimit::pipe {

// The time between writes by default in byte mode: any 100 ms window then holds the writes of
// one interval at most, 1.08 times the rate, with 8 ms to spare for a late wake-up (the shaper's
// or its reader's). The wake-ups are most of the CPU that shaping costs (bench/results/cpu.md), so
// this writes about as often as pv does (every 100 ms) where a finer grain would cost several
// times more. An interval's data larger than a pipe holds is written in equal parts (see
// default_chunk_units), which keeps the bound.
inline constexpr std::chrono::nanoseconds kByteWriteInterval = std::chrono::milliseconds(108);
// In record modes: a record is often a job for the next command (`| xargs -n1`), so up to 100
// records a second go one by one, evenly spaced, rather than in bunches.
inline constexpr std::chrono::nanoseconds kRecordWriteInterval = std::chrono::milliseconds(10);
// A shared pipe's chunk in byte mode (--key, the chunk not given): one booking on the key. The
// pipes on a key take turns of one booking each, so what each gets while they all run is whole
// bookings, give or take one: over the second or two that four pipes may share a key, 108 ms
// bookings (about four per pipe) left shares of 19 to 31 %, 54 ms ones 23 to 26.5 %
// (bench/results/shared.md). Not shorter: a turn is also what a late wake-up (the pipe's or its
// reader's) can eat into before its data goes out in the next pipe's turn, and 36 ms turns made
// more 100 ms windows above 1.3 under a CPU hog. A store call per 54 ms per pipe is the price.
inline constexpr std::chrono::nanoseconds kSharedByteWriteInterval = std::chrono::milliseconds(54);
// The writes a shared pipe makes of one chunk (one booking), spread over the chunk's time: the
// bookings of several pipes follow each other on the key, and a short last chunk of one pipe then
// shares a 100 ms window with a part of the next pipe's chunk, not with all of it (1.08 and a
// part, against 2.08 for whole chunks). Parts of 12 ms at most: a part a few ms late still leaves a
// 100 ms window below 1.25 times the rate (1.08 and one more part).
inline constexpr std::chrono::nanoseconds kSharedWritePart = std::chrono::milliseconds(12);
// The fewest equal parts of `write_interval` no longer than kSharedWritePart (5 of 10.8 ms for 54).
inline int shared_writes_per_chunk(std::chrono::nanoseconds write_interval) {
  return std::max<int>(
      1, static_cast<int>((write_interval + kSharedWritePart - std::chrono::nanoseconds(1)) /
                          kSharedWritePart));
}

// The most units a pipe writes or books at once under a quota of `limit`: a chunk goes whole, so
// one that does not fit what is left of a window waits for the next; at a 16th of the limit, at
// most that much of a window is left unused (1 unit for limits below 32).
inline std::int64_t largest_chunk_under_quota(std::int64_t limit) {
  return std::max<std::int64_t>(limit / 16, 1);
}

// The units a rate gives in `interval`, divided last, so that whole rates and intervals give whole
// numbers (1000 B/s x 10 ms is 10).
inline double units_in(double units_per_second, std::chrono::nanoseconds interval) {
  return units_per_second * static_cast<double>(interval.count()) / 1e9;
}

inline std::chrono::nanoseconds default_write_interval(bool counts_bytes) {
  return counts_bytes ? kByteWriteInterval : kRecordWriteInterval;
}

// The units per write for a rate written every `interval`: at least one, at most `max_units`.
// Where `interval` of the rate exceeds `max_units`, the interval is divided into the fewest equal
// writes that fit, so that the period stays a whole fraction of the interval and a 100 ms window
// holds the same share of the rate as undivided; a chunk merely cut to `max_units` would leave a
// period such as 65 ms of a 108 ms interval, whose 100 ms windows hold two (1.31 times the rate).
inline std::int64_t default_chunk_units(double units_per_second, std::int64_t max_units,
                                        std::chrono::nanoseconds interval) {
  const double per_write = units_in(units_per_second, interval);
  const auto most = static_cast<double>(max_units);
  if (per_write < most) return std::max<std::int64_t>(1, static_cast<std::int64_t>(per_write));
  if (!std::isfinite(per_write)) return max_units;  // "off"
  return std::max<std::int64_t>(1,
                                static_cast<std::int64_t>(per_write / std::ceil(per_write / most)));
}

// The units of each part of a chunk of `chunk_units` written in parts of `part_interval` of the
// rate or less: the fewest equal parts that are no longer (a chunk no longer than one part goes
// whole, as one that a pipe's capacity cut short at a high rate does), so that a pipe's short last
// chunk goes in parts no longer than the others.
inline std::int64_t chunk_part_units(double units_per_second, std::int64_t chunk_units,
                                     std::chrono::nanoseconds part_interval) {
  const double per_part = units_in(units_per_second, part_interval);
  // A whole number of parts, though the rate x interval be a hair above it.
  const double parts = std::ceil(static_cast<double>(chunk_units) / per_part * (1 - 1e-9));
  if (!(parts > 1)) return chunk_units;
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(chunk_units) / parts));
}

}  // namespace ratelimit::pipe
