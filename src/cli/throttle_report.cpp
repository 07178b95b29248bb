#include "cli/throttle_report.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "cli/units.hpp"
#include "format/escaping.hpp"
#include "format/quantities.hpp"

namespace ratelimit::cli {

void add_max_pause_option(CLI::App& app, std::chrono::nanoseconds& max_pause) {
  add_read_option(app, "--max-pause", max_pause, parse_duration, "DURATION",
                  "The longest pause one Retry-After may ask for [default: 5m]")
      ->group("Back-off");
}

stores::ThrottleResult report_throttle(stores::BucketStore& store, const std::string& key,
                                       std::chrono::nanoseconds sent_before,
                                       std::chrono::nanoseconds retry_after,
                                       std::chrono::nanoseconds max_pause,
                                       const StoreOptions& options) {
  const std::optional<stores::ThrottleResult> result = store.throttle(
      {.key = key, .sent_before = sent_before, .retry_after = std::min(retry_after, max_pause)});
  if (!result) throw no_bucket(key, options);
  if (options.verbose)
    fmt::print(stderr, "ratelimit: key '{}' throttled: {}, rate in force {}{}\n",
               format::escaped_bytes(key),
               result->outcome.new_event ? "rate cut" : "same event, no new cut",
               format::written_rate(result->rate_in_force),
               result->paused_for > std::chrono::nanoseconds::zero()
                   ? fmt::format(", paused for {}", format::human_duration(result->paused_for))
                   : std::string());
  return *result;
}

}  // namespace ratelimit::cli
