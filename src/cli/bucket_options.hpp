#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "backends/bucket_backend.hpp"
#include "format/quantities.hpp"
#include "ratelimit/quota.hpp"
#include "ratelimit/timetable.hpp"
#include "ratelimit/token_bucket.hpp"

namespace ratelimit::cli {

// The options that shape a token bucket, shared by every command that has one.
struct BucketOptions {
  std::string rate;    // required by the commands that use it; a rate, or a timetable of rates
  std::string burst;   // empty: Guava's one second of stored permits
  std::string warmup;  // empty: SmoothBursty; otherwise SmoothWarmingUp over this duration
  double cold_factor = 3.0;
  bool start_full = false;  // the classic bucket's start instead of Guava's empty one
  bool pay_first = false;   // a request waits for its own permits instead of the next one paying
  std::vector<std::string> quotas;  // --quota N/PERIOD, each
};

// How many --quota options a command takes at the most.
inline constexpr std::size_t kMaxQuotas = 8;

// The syntax of --rate, whatever the command counts: one rate, or a timetable. Throws UsageError.
void check_rate_syntax(const std::string& text);

// Declares --rate, --burst, --warmup, --cold-factor, --start-full, --pay-first and --quota on
// `app`, with their syntax checks; the help's examples are in what the command counts, `counted`.
void add_bucket_options(CLI::App& app, BucketOptions& options, format::Counted counted);

// --rate and the other bucket options, parsed once at one instant: all a command takes of them.
struct ParsedBucket {
  // The core's parameters, at the rate in force then when --rate is a timetable.
  BucketParams params;
  // What a shared key keeps of --rate: the timetable and the end of its entry in force then;
  // nothing for one rate.
  backends::KeySchedule key_schedule;
  // The timetable --rate gives, if it gives one.
  std::optional<Timetable> timetable;
  // --quota, in the order given; without --rate the rate is no limit.
  std::vector<QuotaParams> quotas;
};

// How the options were written, to show the bucket's rates and burst back alike (see
// notation_of() of units.hpp).
format::Notation notation_of(const BucketOptions& options, format::Counted counted);

// Throws UsageError naming the bad value (neither --rate nor --quota, a bad timetable entry, or a
// rate or quota in bytes or bits where `counted` is not bytes: only a command that counts bytes
// takes B and bit).
ParsedBucket parse_bucket_options(
    const BucketOptions& options, format::Counted counted,
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace ratelimit::cli
