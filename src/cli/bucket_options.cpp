#include "cli/bucket_options.hpp"

#include <cmath>

#include "cli/units.hpp"

namespace ratelimit::cli {
namespace {

bool is_duration(const std::string& text) {
  // A burst ends in a time unit ("2s", "500ms", "1m") or is a size ("64k", "1MiB", "0").
  return !text.empty() &&
         (text.back() == 's' || text.back() == 'm' || text.back() == 'h' || text.back() == 'd');
}

}  // namespace

void add_bucket_options(CLI::App& app, BucketOptions& options) {
  app.add_option("-r,--rate", options.rate,
                 "Rate: units per period, e.g. 5000, 1.5M, 10MiB/s, 8Mbit/s, 2/s, 100/m, 30/15s")
      ->check(syntax_check(parse_rate, "RATE"))
      ->group("Rate");
  auto* warmup = app.add_option("--warmup", options.warmup,
                                "Start cold and speed up to the rate over this duration "
                                "(Guava SmoothWarmingUp), e.g. 10s")
                     ->check(syntax_check(parse_duration, "DURATION"))
                     ->group("Rate");
  app.add_option("--burst", options.burst,
                 "Unused capacity stored for a burst, as time (2s) or units (64k); 0 is strictly "
                 "smooth [default: 1s]")
      ->check(syntax_check(
          [](const std::string& text) {
            return is_duration(text) ? static_cast<double>(parse_duration(text).count())
                                     : parse_size(text);
          },
          "BURST"))
      ->excludes(warmup)
      ->group("Rate");
  app.add_option("--cold-factor", options.cold_factor,
                 "With --warmup: how many times slower than the rate a cold start is")
      ->check(number_in(1.0, 1e6))
      ->needs(warmup)
      ->group("Rate");
  app.add_flag("--start-full", options.start_full,
               "A new bucket holds its whole burst, as the classic token bucket [default: empty, "
               "as Guava]")
      ->excludes(warmup)
      ->group("Rate");
  app.add_flag("--pay-first", options.pay_first,
               "A request waits until its permits exist, leaving no debt to the next [default: "
               "the next request pays, as Guava]")
      ->group("Rate");
}

BucketParams to_bucket_params(const BucketOptions& options, RateUnits units) {
  if (options.rate.empty()) throw UsageError("--rate is required (e.g. --rate 5000 or --rate 2/s)");
  const Rate rate = parse_rate(options.rate);
  if (units == RateUnits::plain && rate.unit != DataUnit::unspecified)
    throw UsageError("rate '" + options.rate +
                     "' is in bytes or bits, but this mode counts units: write it without B/bit");
  BucketParams params;
  params.permits_per_second = rate.units_per_second;
  params.start_full = options.start_full;
  params.pay_first = options.pay_first;
  if (!options.warmup.empty()) {
    params.shape = BucketShape::warming_up;
    params.warmup = parse_duration(options.warmup);
    params.cold_factor = options.cold_factor;
  } else if (!options.burst.empty()) {
    params.max_burst_seconds =
        is_duration(options.burst)
            ? std::chrono::duration<double>(parse_duration(options.burst)).count()
            : parse_size(options.burst) / rate.units_per_second;
    if (!std::isfinite(params.max_burst_seconds))
      throw UsageError("invalid burst '" + options.burst + "': longer than any duration at rate '" +
                       options.rate + "'");
  }
  return params;
}

}  // namespace ratelimit::cli
