#include <fmt/core.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/throttle_report.hpp"
#include "cli/units.hpp"
#include "errors.hpp"
#include "format/retry_after.hpp"

namespace ratelimit::cli {
namespace {

struct ThrottleOptions {
  StoreOptions store;
  std::string key;
  std::optional<Written<std::chrono::nanoseconds>> retry_after;
  std::chrono::nanoseconds max_pause = kDefaultMaxPause;
};

std::chrono::nanoseconds parse_retry_after(const std::string& text) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::optional<std::chrono::nanoseconds> delay = format::retry_after_delay(
      text, std::chrono::duration_cast<std::chrono::seconds>(now).count());
  if (!delay)
    throw UsageError(fmt::format(
        "invalid Retry-After '{}': seconds (30) or an HTTP date (Wed, 21 Oct 2026 07:28:00 GMT)",
        text));
  return *delay;
}

int run_throttle(const ThrottleOptions& options) {
  if (!may_hold_buckets(options.store)) throw no_bucket(options.key, options.store);
  const std::unique_ptr<stores::BucketStore> store = stores::open_store(options.store.stores);
  // A script reports the 429 of the request it has just made.
  const std::chrono::nanoseconds retry_after =
      options.retry_after ? options.retry_after->value : std::chrono::nanoseconds::zero();
  report_throttle(*store, options.key, kReportedRequestAge, retry_after, options.max_pause,
                  options.store);
  return exit_ok;
}

}  // namespace

Command setup_throttle(CLI::App& app) {
  auto options = std::make_shared<ThrottleOptions>();
  CLI::App* throttle = app.add_subcommand(
      "throttle", "Tell every user of a shared bucket that the service said \"too many\"");
  add_store_options(*throttle, options->store);
  add_key_option(*throttle, options->key)->required();
  add_written_option(*throttle, "--retry-after", options->retry_after, parse_retry_after,
                     "SECONDS|HTTP-DATE",
                     "The service's Retry-After: seconds or an HTTP date; nothing on the key is "
                     "granted until then")
      ->group("Back-off");
  add_max_pause_option(*throttle, options->max_pause);
  throttle->footer(R"help(Examples:
  ratelimit throttle --key api                       cut the key's rate (x0.5), recovering in 5s
  ratelimit throttle --key api --retry-after 30      and nothing on the key for 30 s
  code=$(curl -s -o out -D headers -w '%{http_code}' "$url")
  [ "$code" = 429 ] && ratelimit throttle --key api \
      --retry-after "$(sed -n 's/^retry-after: *//Ip' headers | tr -d '\r')"

Every host and process on the key backs off together: a rate cut once per burst of reports,
pauses ending at the latest Retry-After reported, never at their sum.)help");
  return {throttle, [options] { return run_throttle(*options); }};
}

}  // namespace ratelimit::cli
