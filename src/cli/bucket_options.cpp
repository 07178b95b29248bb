#include "cli/bucket_options.hpp"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "cli/units.hpp"
#include "format/quantities.hpp"
#include "io/local_time_posix.hpp"
#include "schedule/timetable_text.hpp"

namespace ratelimit::cli {
namespace {

// A burst is time ("2s", "500ms", "1m") or an amount ("64k", "1MiB", "0").
bool is_duration(const std::string& text) { return ends_in_time_unit(text); }

// One rule for --rate and --burst: bytes and bits only where bytes are counted.
void check_data_unit(const std::string& option, const std::string& text, DataUnit unit,
                     format::Counted counted) {
  if (counted != format::Counted::bytes && unit != DataUnit::unspecified)
    throw UsageError(fmt::format(
        "{} '{}' is in bytes or bits, but this command counts {}: write it without B/bit", option,
        text, format::counted_name(counted)));
}

// Rates slower than this look like a hang: the pipe or the command waits in silence.
constexpr double kSlowestQuietSeconds = 3600.0;

// Units per second of one rate as written, checked against what the command counts.
double units_per_second(std::string_view text, format::Counted counted) {
  const Rate rate = parse_rate(text);
  check_data_unit("rate", std::string(text), rate.unit, counted);
  return rate.units_per_second;
}

// The one place where the core's refusal of a value becomes a UsageError (64): here the CLI
// hands the core what the user wrote. The core names the value in its std::invalid_argument and
// knows no exit statuses; `context`, if any, says which option the value came from.
template <typename Make>
auto given_to_core(const std::string& context, Make make) {
  try {
    return make();
  } catch (const std::invalid_argument& error) {
    throw UsageError(context + error.what());
  }
}

QuotaParams quota_of(const std::string& text, format::Counted counted) {
  const QuotaAmount quota = parse_quota(text);
  check_data_unit("quota", text, quota.unit, counted);
  return QuotaParams{.limit = static_cast<std::int64_t>(quota.units), .period = quota.period};
}

Timetable timetable_of(std::string_view text, format::Counted counted) {
  Timetable timetable = given_to_core("invalid timetable '" + std::string(text) + "': ", [&] {
    return Timetable(schedule::parse_timetable(
        text, [counted](std::string_view rate) { return units_per_second(rate, counted); }));
  });
  if (const std::size_t bytes = schedule::timetable_text(timetable).size();
      bytes > backends::kMaxTimetableBytes)
    throw UsageError(fmt::format(
        "invalid timetable of {} entries: too long ({} bytes as a key keeps it, at most {})",
        timetable.entries().size(), bytes, backends::kMaxTimetableBytes));
  return timetable;
}

TimetablePeriod period_at(const Timetable& timetable, std::chrono::system_clock::time_point now) {
  return timetable.at(std::chrono::floor<std::chrono::seconds>(now), io::LocalTimeZone());
}

}  // namespace

void check_rate_syntax(const std::string& text) {
  if (schedule::is_timetable(text)) {
    timetable_of(text, format::Counted::bytes);
  } else {
    parse_rate(text);
  }
}

void add_bucket_options(CLI::App& app, BucketOptions& options, format::Counted counted) {
  const bool data = counted == format::Counted::bytes;
  app.add_option(
         "-r,--rate", options.rate,
         data ? "Rate: units per period, e.g. 5000, 1.5M, 10MiB/s, 8Mbit/s, 2/s, 100/m, 30/15s; or "
                "a timetable, e.g. \"Mon-08:00,512k 18:00,10M Sat-00:00,off\""
              : "Rate: permits per period, e.g. 2/s, 100/m, 1/h, 30/15s, 1.5k; or a timetable, "
                "e.g. \"08:00,5/s 20:00,50/s\"")
      ->check(syntax_check(check_rate_syntax, "RATE"))
      ->option_text("RATE")
      ->group("Rate");
  auto* warmup = app.add_option("--warmup", options.warmup,
                                "Start cold and speed up to the rate over this duration "
                                "(Guava SmoothWarmingUp), e.g. 10s")
                     ->check(syntax_check(parse_duration, "DURATION"))
                     ->option_text("DURATION")
                     ->group("Rate");
  app.add_option("--burst", options.burst,
                 data ? "Unused capacity stored for a burst, as time (2s) or units (64k); 0 is "
                        "strictly smooth [default: 1s]"
                      : "Unused capacity stored for a burst, as time (2s) or permits (10); 0 is "
                        "strictly smooth [default: 1s]")
      ->check(syntax_check(
          [](const std::string& text) {
            return is_duration(text) ? static_cast<double>(parse_duration(text).count())
                                     : parse_size(text).units;
          },
          "BURST"))
      ->option_text("BURST")
      ->excludes(warmup)
      ->group("Rate");
  app.add_option("--cold-factor", options.cold_factor,
                 "With --warmup: how many times slower than the rate a cold start is")
      ->check(number_in(1.0, 1e6))
      ->option_text("F")
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
  app.add_option("--quota", options.quotas,
                 data ? "At most N units in any window of PERIOD, beside the rate; repeatable, "
                        "e.g. 50GB/d, 5000/h, 300/10m"
                      : "At most N permits in any window of PERIOD, beside the rate; repeatable, "
                        "e.g. 5000/h, 350/10s")
      ->check(syntax_check(parse_quota, "QUOTA"))
      ->option_text("N/PERIOD")
      ->allow_extra_args(false)
      ->take_all()
      ->group("Rate");
}

format::Notation notation_of(const BucketOptions& options, format::Counted counted) {
  format::Notation notation = notation_of(options.rate, counted);
  notation.burst_in_units = !options.burst.empty() && !is_duration(options.burst);
  return notation;
}

ParsedBucket parse_bucket_options(const BucketOptions& options, format::Counted counted,
                                  std::chrono::system_clock::time_point now) {
  ParsedBucket parsed;
  if (options.quotas.size() > kMaxQuotas)
    throw UsageError(
        fmt::format("too many --quota: {} given, at most {}", options.quotas.size(), kMaxQuotas));
  for (const std::string& quota : options.quotas) parsed.quotas.push_back(quota_of(quota, counted));
  BucketParams& params = parsed.params;
  if (options.rate.empty()) {
    if (parsed.quotas.empty())
      throw UsageError("--rate is required (e.g. --rate 5000 or --rate 2/s), or a --quota");
    if (!options.burst.empty() || !options.warmup.empty() || options.start_full)
      throw UsageError("--burst, --warmup and --start-full shape the rate: give --rate too");
    // Quotas alone: no smoothing.
    params.permits_per_second = std::numeric_limits<double>::infinity();
    params.pay_first = options.pay_first;
    return parsed;
  }
  if (schedule::is_timetable(options.rate)) {
    if (!options.burst.empty() && !is_duration(options.burst))
      throw UsageError(
          "invalid burst '" + options.burst +
          "': with a timetable, give the burst as a time (e.g. 2s), as the rate changes");
    const Timetable& timetable = parsed.timetable.emplace(timetable_of(options.rate, counted));
    const TimetablePeriod period = period_at(timetable, now);
    params.permits_per_second = period.permits_per_second;
    parsed.key_schedule = {.timetable = schedule::timetable_text(timetable),
                           .entry_until = period.next_change.time_since_epoch().count()};
  } else {
    const Rate rate = parse_rate(options.rate);
    check_data_unit("rate", options.rate, rate.unit, counted);
    params.permits_per_second = rate.units_per_second;
  }
  params.start_full = options.start_full;
  params.pay_first = options.pay_first;
  if (!options.warmup.empty()) {
    params.shape = BucketShape::warming_up;
    params.warmup = parse_duration(options.warmup);
    params.cold_factor = options.cold_factor;
  } else if (!options.burst.empty()) {
    if (is_duration(options.burst)) {
      params.max_burst_seconds =
          std::chrono::duration<double>(parse_duration(options.burst)).count();
    } else {
      const Amount burst = parse_size(options.burst);
      check_data_unit("burst", options.burst, burst.unit, counted);
      params.max_burst_seconds = burst.units / params.permits_per_second;
    }
    if (!std::isfinite(params.max_burst_seconds))
      throw UsageError("invalid burst '" + options.burst + "': longer than any duration at rate '" +
                       options.rate + "'");
  }
  given_to_core("", [&] { validate(params); });
  // Once the options are known to be good: a warning before an error would be noise.
  if (!parsed.timetable && 1.0 / params.permits_per_second > kSlowestQuietSeconds)
    fmt::print(
        stderr, "ratelimit: warning: at rate '{}' one unit takes {}\n", options.rate,
        format::human_duration(std::chrono::duration<double>(1.0 / params.permits_per_second)));
  return parsed;
}

}  // namespace ratelimit::cli
