#include "cli/bucket_options.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "cli/timetable_option.hpp"
#include "cli/units.hpp"
#include "io/local_time_posix.hpp"

namespace ratelimit::cli {
namespace {

bool is_duration(const std::string& text) {
  // A burst ends in a time unit ("2s", "500ms", "1m") or is a size ("64k", "1MiB", "0").
  return !text.empty() &&
         (text.back() == 's' || text.back() == 'm' || text.back() == 'h' || text.back() == 'd');
}

// Units per second of one rate as written, checked against what the command counts.
double units_per_second(std::string_view text, RateUnits units) {
  const Rate rate = parse_rate(text);
  if (units == RateUnits::plain && rate.unit != DataUnit::unspecified)
    throw UsageError("rate '" + std::string(text) +
                     "' is in bytes or bits, but this mode counts units: write it without B/bit");
  return rate.units_per_second;
}

Timetable timetable_of(std::string_view text, RateUnits units) {
  try {
    return Timetable(parse_timetable(
        text, [units](std::string_view rate) { return units_per_second(rate, units); }));
  } catch (const std::invalid_argument& error) {
    throw UsageError("invalid timetable '" + std::string(text) + "': " + error.what());
  }
}

}  // namespace

void check_rate_syntax(const std::string& text) {
  if (is_timetable(text)) {
    timetable_of(text, RateUnits::data);
  } else {
    parse_rate(text);
  }
}

void add_bucket_options(CLI::App& app, BucketOptions& options) {
  app.add_option("-r,--rate", options.rate,
                 "Rate: units per period, e.g. 5000, 1.5M, 10MiB/s, 8Mbit/s, 2/s, 100/m, 30/15s; "
                 "or a timetable, e.g. \"Mon-08:00,512k 18:00,10M Sat-00:00,off\"")
      ->check(syntax_check(check_rate_syntax, "RATE"))
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
}

BucketParams to_bucket_params(const BucketOptions& options, RateUnits units) {
  if (options.rate.empty()) throw UsageError("--rate is required (e.g. --rate 5000 or --rate 2/s)");
  BucketParams params;
  if (const std::optional<Timetable> timetable = to_timetable(options, units)) {
    if (!options.burst.empty() && !is_duration(options.burst))
      throw UsageError(
          "invalid burst '" + options.burst +
          "': with a timetable, give the burst as a time (e.g. 2s), as the rate changes");
    const io::LocalTimeZone zone;
    params.permits_per_second =
        timetable
            ->at(std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()), zone)
            .permits_per_second;
  } else {
    params.permits_per_second = units_per_second(options.rate, units);
  }
  if (!options.warmup.empty()) {
    params.shape = BucketShape::warming_up;
    params.warmup = parse_duration(options.warmup);
    params.cold_factor = options.cold_factor;
  } else if (!options.burst.empty()) {
    params.max_burst_seconds =
        is_duration(options.burst)
            ? std::chrono::duration<double>(parse_duration(options.burst)).count()
            : parse_size(options.burst) / params.permits_per_second;
    if (!std::isfinite(params.max_burst_seconds))
      throw UsageError("invalid burst '" + options.burst + "': longer than any duration at rate '" +
                       options.rate + "'");
  }
  return params;
}

std::optional<Timetable> to_timetable(const BucketOptions& options, RateUnits units) {
  if (!is_timetable(options.rate)) return std::nullopt;
  return timetable_of(options.rate, units);
}

}  // namespace ratelimit::cli
