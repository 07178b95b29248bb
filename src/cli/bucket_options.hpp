#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/units.hpp"
#include "format/quantities.hpp"
#include "format/timetable_text.hpp"
#include "ratelimit/quota.hpp"
#include "ratelimit/timetable.hpp"
#include "ratelimit/token_bucket.hpp"
#include "stores/bucket_store.hpp"

namespace ratelimit::cli {

// --rate as read: one rate, or a timetable of rates.
struct RateValue {
  Rate rate{};                         // one rate; nothing with a timetable
  std::optional<Timetable> timetable;  // or a timetable
  // The first entry of the timetable whose rate is written in bytes or bits, which only a
  // command that counts bytes takes.
  std::optional<format::WrittenTimetableEntry> first_in_data_units;
};
// The syntax of --rate, whatever the command counts. Throws UsageError naming the bad value.
RateValue read_rate(std::string_view text);
// How the rate was written, to show rates and amounts of `counted` back alike; a timetable's are
// shown with SI prefixes.
format::Notation notation_of(const RateValue& rate, format::Counted counted);

// The options that shape a token bucket, shared by every command that has one, as read.
struct BucketOptions {
  // Required by the commands that use it: a rate, or a timetable of rates.
  std::optional<Written<RateValue>> rate;
  std::optional<Written<TimeOrAmount>> burst;      // none: Guava's one second of stored permits
  std::optional<std::chrono::nanoseconds> warmup;  // none: SmoothBursty; else SmoothWarmingUp
  double cold_factor = 3.0;
  bool start_full = false;  // the classic bucket's start instead of Guava's empty one
  bool pay_first = false;   // a request waits for its own permits instead of the next one paying
  std::vector<Written<QuotaAmount>> quotas;  // --quota N/PERIOD, each
};

// How many --quota options a command takes at the most.
inline constexpr std::size_t kMaxQuotas = 8;

// --rate, read into `rate` (`set` declares its own).
CLI::Option* add_rate_option(CLI::App& app, std::optional<Written<RateValue>>& rate,
                             const std::string& description);

// Declares --rate, --burst, --warmup, --cold-factor, --start-full, --pay-first and --quota on
// `app`, with their syntax checks; the help's examples are in what the command counts, `counted`.
void add_bucket_options(CLI::App& app, BucketOptions& options, format::Counted counted);

// --rate and the other bucket options, parsed once at one instant: all a command takes of them.
struct ParsedBucket {
  // The core's parameters, at the rate in force then when --rate is a timetable.
  BucketParams params;
  // What a shared key keeps of --rate: the timetable and the end of its entry in force then;
  // nothing for one rate.
  stores::KeySchedule key_schedule;
  // The timetable --rate gives, if it gives one.
  std::optional<Timetable> timetable;
  // --quota, in the order given; without --rate the rate is no limit.
  std::vector<QuotaParams> quotas;
  // How the options were written, to show the bucket's rates and burst back alike.
  format::Notation notation;
};

// The bucket of `options` for a command that counts `counted`, at `now`. Throws UsageError naming
// the bad value (neither --rate nor --quota, options that do not go together, or a rate, burst or
// quota in bytes or bits where `counted` is not bytes: only a command that counts bytes takes B
// and bit).
ParsedBucket bucket_of(
    const BucketOptions& options, format::Counted counted,
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// What `ratelimit set --key` gives a key: the bucket options, and the quotas it removes.
struct KeyChangeOptions {
  BucketOptions bucket;
  // --no-quota: the periods of the quotas to remove; all of them when all_quotas.
  std::vector<std::chrono::nanoseconds> removed_quota_periods;
  bool all_quotas_removed = false;
  // --no-start-full, --no-pay-first: the flag turned off.
  bool start_full_off = false;
  bool pay_first_off = false;
};

// The key's settings and schedule after `ratelimit set --key` with `options` at `now`: the key's
// (`key`), with only what the options give changed (--rate the rate or timetable, --burst or
// --warmup the shape, --start-full and --pay-first turned on and their --no- forms off, each
// --quota added or in place of the key's of its period, each --no-quota removed). A key without a
// bucket (none) gets what the options make, as its first user's would (`counted` as bucket_of()).
// Throws UsageError naming a bad value.
struct KeyChange {
  stores::KeySettings settings;
  stores::KeySchedule schedule;
};
KeyChange changed_key(const KeyChangeOptions& options,
                      const std::optional<stores::BucketStatus>& key, format::Counted counted,
                      std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace ratelimit::cli
