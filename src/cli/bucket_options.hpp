#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "ratelimit/token_bucket.hpp"

namespace ratelimit::cli {

// The options that shape a token bucket, shared by every command that has one.
struct BucketOptions {
  std::string rate;    // required by the commands that use it; parse_rate syntax
  std::string burst;   // empty: Guava's one second of stored permits
  std::string warmup;  // empty: SmoothBursty; otherwise SmoothWarmingUp over this duration
  double cold_factor = 3.0;
  bool start_full = false;  // the classic bucket's start instead of Guava's empty one
  bool pay_first = false;   // a request waits for its own permits instead of the next one paying
};

// Declares --rate, --burst, --warmup, --cold-factor, --start-full and --pay-first on `app`, with
// their syntax checks.
void add_bucket_options(CLI::App& app, BucketOptions& options);

// What a rate may be written in: `data` allows bytes and bits (byte mode), otherwise only plain
// units (lines, records, permits).
enum class RateUnits { data, plain };

// The core's parameters for the options given. Throws UsageError naming the bad value (a missing
// --rate, or a rate in bytes where units are counted).
BucketParams to_bucket_params(const BucketOptions& options, RateUnits units);

}  // namespace ratelimit::cli
