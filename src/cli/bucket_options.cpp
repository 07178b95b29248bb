#include "cli/bucket_options.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <variant>
#include <vector>

#include "cli/units.hpp"
#include "format/quantities.hpp"
#include "format/timetable_text.hpp"
#include "io/local_time_posix.hpp"

namespace ratelimit::cli {
namespace {

// One rule for --rate, --burst and --quota: bytes and bits only where bytes are counted. What
// is wrong with `text` of `option` in `unit` for a command that counts `counted`; empty if nothing.
std::string data_unit_refusal(const std::string& option, const std::string& text, DataUnit unit,
                              format::Counted counted) {
  if (counted == format::Counted::bytes || unit == DataUnit::unspecified) return {};
  return fmt::format(
      "{} '{}' is in bytes or bits, but this command counts {}: write it without B/bit", option,
      text, format::counted_name(counted));
}

void check_data_unit(const std::string& option, const std::string& text, DataUnit unit,
                     format::Counted counted) {
  if (std::string refusal = data_unit_refusal(option, text, unit, counted); !refusal.empty())
    throw UsageError(std::move(refusal));
}

// Rates slower than this look like a hang: the pipe or the command waits in silence.
constexpr double kSlowestQuietSeconds = 3600.0;

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

// The timetable of `text`, and the first of its entries whose rate is in bytes or bits.
Timetable timetable_of(std::string_view text,
                       std::optional<format::WrittenTimetableEntry>& first_in_data_units) {
  std::vector<format::WrittenTimetableEntry> written = format::parse_timetable(text);
  std::vector<TimetableEntry> entries;
  for (format::WrittenTimetableEntry& entry : written) {
    entries.push_back(entry.entry);
    if (entry.unit != DataUnit::unspecified && !first_in_data_units)
      first_in_data_units = std::move(entry);
  }
  Timetable timetable = given_to_core("invalid timetable '" + std::string(text) + "': ",
                                      [&] { return Timetable(std::move(entries)); });
  if (const std::size_t bytes = format::timetable_text(timetable).size();
      bytes > stores::kMaxTimetableBytes)
    throw UsageError(fmt::format(
        "invalid timetable of {} entries: too long ({} bytes as a key keeps it, at most {})",
        timetable.entries().size(), bytes, stores::kMaxTimetableBytes));
  return timetable;
}

// Refuses the timetable's first rate in bytes or bits, naming its entry, when `counted` is not
// bytes.
void check_timetable_units(const RateValue& rate, format::Counted counted) {
  if (!rate.first_in_data_units) return;
  const format::WrittenTimetableEntry& entry = *rate.first_in_data_units;
  if (const std::string refusal = data_unit_refusal("rate", entry.rate_text, entry.unit, counted);
      !refusal.empty())
    throw UsageError(fmt::format("invalid timetable entry '{}': {}", entry.text, refusal));
}

TimetablePeriod period_at(const Timetable& timetable, std::chrono::system_clock::time_point now) {
  return timetable.at(std::chrono::floor<std::chrono::seconds>(now), io::LocalTimeZone());
}

QuotaParams quota_of(const Written<QuotaAmount>& quota, format::Counted counted) {
  check_data_unit("quota", quota.text, quota.value.unit, counted);
  return QuotaParams{.limit = static_cast<std::int64_t>(quota.value.units),
                     .period = quota.value.period};
}

// The seconds of stored permits that --burst gives at `permits_per_second`.
double burst_seconds(const Written<TimeOrAmount>& burst, double permits_per_second,
                     format::Counted counted) {
  if (const auto* time = std::get_if<std::chrono::nanoseconds>(&burst.value))
    return std::chrono::duration<double>(*time).count();
  const Amount& amount = std::get<Amount>(burst.value);
  check_data_unit("burst", burst.text, amount.unit, counted);
  return amount.units / permits_per_second;
}

bool is_time(const std::optional<Written<TimeOrAmount>>& burst) {
  return burst && std::holds_alternative<std::chrono::nanoseconds>(burst->value);
}

}  // namespace

RateValue read_rate(std::string_view text) {
  RateValue rate;
  if (!format::is_timetable(text)) {
    rate.rate = parse_rate(text);
    return rate;
  }
  rate.timetable = timetable_of(text, rate.first_in_data_units);
  return rate;
}

format::Notation notation_of(const RateValue& rate, format::Counted counted) {
  if (rate.timetable) return {.counted = counted};
  return notation_of(rate.rate, counted);
}

CLI::Option* add_rate_option(CLI::App& app, std::optional<Written<RateValue>>& rate,
                             const std::string& description) {
  return add_written_option(app, "-r,--rate", rate, read_rate, "RATE", description);
}

void add_bucket_options(CLI::App& app, BucketOptions& options, format::Counted counted) {
  const bool data = counted == format::Counted::bytes;
  add_rate_option(
      app, options.rate,
      data ? "Rate: units per period, e.g. 5000, 1.5M, 10MiB/s, 8Mbit/s, 2/s, 100/m, 30/15s, off "
             "(no limit); or a timetable, e.g. \"Mon-Fri-08:00,512k 18:00,10M Sat-00:00,off\""
           : "Rate: permits per period, e.g. 2/s, 100/m, 1/h, 30/15s, 1.5k, off (no limit); or a "
             "timetable, e.g. \"Mon-Fri-08:00,5/s 20:00,50/s\"")
      ->group("Rate");
  auto* warmup = add_read_option(app, "--warmup", options.warmup, parse_duration, "DURATION",
                                 "Start cold and speed up to the rate over this duration "
                                 "(Guava SmoothWarmingUp), e.g. 10s")
                     ->group("Rate");
  add_written_option(app, "--burst", options.burst, parse_time_or_amount, "BURST",
                     data ? "Unused capacity stored for a burst, as time (2s) or units (64k); 0 "
                            "is strictly smooth [default: 1s]"
                          : "Unused capacity stored for a burst, as time (2s) or permits (10); 0 "
                            "is strictly smooth [default: 1s]")
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
  add_written_option(app, "--quota", options.quotas, parse_quota, "N/PERIOD",
                     data ? "At most N units in any window of PERIOD, beside the rate; "
                            "repeatable, e.g. 50GB/d, 5000/h, 300/10m"
                          : "At most N permits in any window of PERIOD, beside the rate; "
                            "repeatable, e.g. 5000/h, 350/10s")
      ->allow_extra_args(false)
      ->take_all()
      ->group("Rate");
}

ParsedBucket bucket_of(const BucketOptions& options, format::Counted counted,
                       std::chrono::system_clock::time_point now) {
  ParsedBucket parsed;
  if (options.quotas.size() > kMaxQuotas)
    throw UsageError(
        fmt::format("too many --quota: {} given, at most {}", options.quotas.size(), kMaxQuotas));
  for (const Written<QuotaAmount>& quota : options.quotas)
    parsed.quotas.push_back(quota_of(quota, counted));
  BucketParams& params = parsed.params;
  parsed.notation = {.counted = counted};
  if (!options.rate) {
    if (parsed.quotas.empty())
      throw UsageError("--rate is required (e.g. --rate 5000 or --rate 2/s), or a --quota");
    if (options.burst || options.warmup || options.start_full)
      throw UsageError("--burst, --warmup and --start-full shape the rate: give --rate too");
    // Quotas alone: no smoothing.
    params.permits_per_second = std::numeric_limits<double>::infinity();
    params.pay_first = options.pay_first;
    return parsed;
  }
  const Written<RateValue>& rate = *options.rate;
  parsed.notation = notation_of(rate.value, counted);
  parsed.notation.burst_in_units = options.burst && !is_time(options.burst);
  if (rate.value.timetable) {
    if (options.burst && !is_time(options.burst))
      throw UsageError(
          "invalid burst '" + options.burst->text +
          "': with a timetable, give the burst as a time (e.g. 2s), as the rate changes");
    check_timetable_units(rate.value, counted);
    const Timetable& timetable = parsed.timetable.emplace(*rate.value.timetable);
    const TimetablePeriod period = period_at(timetable, now);
    params.permits_per_second = period.permits_per_second;
    parsed.key_schedule = {.timetable = format::timetable_text(timetable),
                           .entry_until = period.next_change.time_since_epoch().count()};
  } else {
    check_data_unit("rate", rate.text, rate.value.rate.unit, counted);
    params.permits_per_second = rate.value.rate.units_per_second;
  }
  params.start_full = options.start_full;
  params.pay_first = options.pay_first;
  if (options.warmup) {
    params.shape = BucketShape::warming_up;
    params.warmup = *options.warmup;
    params.cold_factor = options.cold_factor;
  } else if (options.burst) {
    params.max_burst_seconds = burst_seconds(*options.burst, params.permits_per_second, counted);
    if (!std::isfinite(params.max_burst_seconds))
      throw UsageError("invalid burst '" + options.burst->text +
                       "': longer than any duration at rate '" + rate.text + "'");
  }
  given_to_core("", [&] { validate(params); });
  // Once the options are known to be good: a warning before an error would be noise.
  if (!parsed.timetable && 1.0 / params.permits_per_second > kSlowestQuietSeconds)
    fmt::print(
        stderr, "ratelimit: warning: at rate '{}' one unit takes {}\n", rate.text,
        format::human_duration(std::chrono::duration<double>(1.0 / params.permits_per_second)));
  return parsed;
}

KeyChange changed_key(const KeyChangeOptions& options,
                      const std::optional<stores::BucketStatus>& key, format::Counted counted,
                      std::chrono::system_clock::time_point now) {
  const BucketOptions& given = options.bucket;
  KeyChange change;
  stores::KeySettings& settings = change.settings;
  if (!key) {
    const ParsedBucket parsed = bucket_of(given, counted, now);
    settings = {.params = parsed.params,
                .timetable = parsed.key_schedule.timetable,
                .quotas = parsed.quotas};
    change.schedule = parsed.key_schedule;
  } else {
    settings = {.params = key->params, .timetable = key->schedule.timetable, .quotas = {}};
    for (const stores::QuotaStatus& quota : key->quotas) settings.quotas.push_back(quota.params);
    change.schedule = key->schedule;
  }
  BucketParams& params = settings.params;
  if (key && given.rate) {
    BucketOptions rate_only;
    rate_only.rate = given.rate;
    const ParsedBucket parsed = bucket_of(rate_only, counted, now);
    params.permits_per_second = parsed.params.permits_per_second;
    change.schedule = parsed.key_schedule;
    settings.timetable = parsed.key_schedule.timetable;
  }
  if (key && given.warmup) {
    params.shape = BucketShape::warming_up;
    params.warmup = *given.warmup;
    params.cold_factor = given.cold_factor;
    params.start_full = false;
  } else if (key && given.burst) {
    if (!settings.timetable.empty() && !is_time(given.burst))
      throw UsageError("invalid burst '" + given.burst->text +
                       "': the key follows a timetable, give the burst as a time (e.g. 2s)");
    params.shape = BucketShape::bursty;
    params.max_burst_seconds = burst_seconds(*given.burst, params.permits_per_second, counted);
    if (!std::isfinite(params.max_burst_seconds))
      throw UsageError("invalid burst '" + given.burst->text + "': longer than any duration");
  }
  if (given.start_full) params.start_full = true;
  if (given.pay_first) params.pay_first = true;
  if (options.start_full_off) params.start_full = false;
  if (options.pay_first_off) params.pay_first = false;
  std::vector<QuotaParams>& quotas = settings.quotas;
  if (options.all_quotas_removed) quotas.clear();
  for (const std::chrono::nanoseconds period : options.removed_quota_periods)
    std::erase_if(quotas, [period](const QuotaParams& quota) { return quota.period == period; });
  if (key) {
    for (const Written<QuotaAmount>& written_quota : given.quotas) {
      const QuotaParams quota = quota_of(written_quota, counted);
      const auto same_period = std::find_if(
          quotas.begin(), quotas.end(), [&](auto& kept) { return kept.period == quota.period; });
      if (same_period != quotas.end())
        *same_period = quota;
      else
        quotas.push_back(quota);
    }
  }
  if (quotas.size() > kMaxQuotas)
    throw UsageError(fmt::format("too many quotas: the key would have {}, at most {}",
                                 quotas.size(), kMaxQuotas));
  given_to_core("", [&] { validate(params); });
  return change;
}

}  // namespace ratelimit::cli
