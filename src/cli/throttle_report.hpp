#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

#include "cli/shared_bucket_options.hpp"
#include "stores/bucket_store.hpp"

// Reporting "too many" on a key, for `throttle` and `exec --throttled-status`.
namespace ratelimit::cli {

// How long before its report a request that `ratelimit throttle` reports was sent: a script
// calls it right after the request that got the 429. Reports of requests sent before the key's
// last cut are of the same event and do not cut again (include/ratelimit/backoff.hpp): a second
// covers a slow answer, and a rate still too high after a cut is cut again a second later.
inline constexpr std::chrono::nanoseconds kReportedRequestAge = std::chrono::seconds(1);

// --max-pause DURATION.
void add_max_pause_option(CLI::App& app, std::chrono::nanoseconds& max_pause);

// Reports a throttle of a request sent `sent_before` ago with `retry_after` (capped at
// `max_pause`) on `key`; says what it did with -v. Throws no_bucket() if the key has none.
stores::ThrottleResult report_throttle(stores::BucketStore& store, const std::string& key,
                                       std::chrono::nanoseconds sent_before,
                                       std::chrono::nanoseconds retry_after,
                                       std::chrono::nanoseconds max_pause,
                                       const StoreOptions& options);

}  // namespace ratelimit::cli
