#include "pipe/progress.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "format/escaping.hpp"
#include "format/json.hpp"

namespace ratelimit::pipe {

using std::chrono::nanoseconds;

namespace {

constexpr int kMaxBarWidth = 40;
constexpr int kMinBarWidth = 5;

double seconds(nanoseconds duration) { return std::chrono::duration<double>(duration).count(); }

double average_rate(const Totals& totals) {
  const double elapsed = seconds(totals.now - totals.started);
  return elapsed > 0.0 ? static_cast<double>(totals.units) / elapsed : 0.0;
}

const char* ending_name(Ending ending) {
  switch (ending) {
    case Ending::end_of_input:
      return "end_of_input";
    case Ending::stopped:
      return "stopped";
    case Ending::downstream_closed:
      return "downstream_closed";
    case Ending::wait_too_long:
      return "wait_too_long";
    case Ending::quota_spent:
      return "quota_spent";
  }
  return "";
}

}  // namespace

format::Counted counted(const Unit& unit) {
  if (unit.counts_bytes()) return format::Counted::bytes;
  if (*unit.delimiter == '\n') return format::Counted::lines;
  return format::Counted::records;
}

// Seconds as nanoseconds, nanoseconds::max() for what does not fit (about 292 years and more).
nanoseconds saturating_nanoseconds(double seconds) {
  constexpr double kMaxSeconds = static_cast<double>(nanoseconds::max().count()) / 1e9;
  if (!(seconds < kMaxSeconds)) return nanoseconds::max();
  return std::chrono::duration_cast<nanoseconds>(std::chrono::duration<double>(seconds));
}

std::string clock_time(nanoseconds duration) {
  const auto total =
      std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(duration).count());
  return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

ProgressMeter::ProgressMeter(const format::Notation& notation,
                             std::optional<std::uint64_t> total_units)
    : notation_(notation), total_units_(total_units) {}

namespace {

// A part of the progress line, left out when the line is too narrow for it.
struct Field {
  std::string text;
  bool shown = true;
  std::size_t length() const { return shown ? text.size() : 0; }
};

// Time left for `remaining` units at the measured average, or at the rate in force while the
// average is above it: the first chunk is free (Guava), so early on the average runs ahead of
// what the rate lets through, and at a slow rate it would promise an end hours too soon.
std::string eta_text(double remaining, const Totals& totals) {
  double speed = average_rate(totals);
  if (std::isfinite(totals.rate) && (speed <= 0.0 || speed > totals.rate)) speed = totals.rate;
  if (!(speed > 0.0)) return {};
  return " ETA " + clock_time(saturating_nanoseconds(remaining / speed));
}

// The parts of the progress line, in the order shown; the bar goes between the average and the
// percentage.
struct ProgressParts {
  Field amount;
  Field elapsed;
  Field current_rate;
  Field average;
  Field percent;
  Field eta;
  std::optional<double> done;  // the fraction done, when the total is known: drawn as a bar
};

// What the line says at `totals`, `current` the rate over the last second, amounts in `notation`
// and every rate per one period: the user's, else the one that suits the rate in force.
// What holds the turn waited for: a quota, a key of several (named), or the rate (nothing said).
std::string held_by_text(const Totals& totals) {
  if (totals.held_by_key.empty()) return totals.held_by_quota ? ", held by a quota" : "";
  return fmt::format(", held by {}key '{}'", totals.held_by_quota ? "a quota of " : "",
                     format::escaped_bytes(totals.held_by_key));
}

ProgressParts parts_of(const Totals& totals, double current, format::Notation notation,
                       std::optional<std::uint64_t> total_units) {
  if (notation.period_seconds == 0.0) notation.period_seconds = format::natural_period(totals.rate);
  ProgressParts parts{
      .amount = {format::measured_amount(static_cast<double>(totals.units), notation)},
      .elapsed = {fmt::format(" {}", clock_time(totals.now - totals.started))},
      .current_rate = {fmt::format(" [{}{}]", format::measured_rate(current, notation),
                                   held_by_text(totals))},
      .average = {fmt::format(" [avg {}]", format::measured_rate(average_rate(totals), notation))},
      .percent = {},
      .eta = {},
      .done = std::nullopt};
  if (!total_units || *total_units == 0) return parts;
  const double total = static_cast<double>(*total_units);
  const double done = std::min(1.0, static_cast<double>(totals.units) / total);
  parts.done = done;
  parts.percent.text = fmt::format(" {:3.0f}%", done * 100.0);
  if (done < 1.0) parts.eta.text = eta_text(total - static_cast<double>(totals.units), totals);
  return parts;
}

// The parts in `width` columns less three, whole parts left out as ProgressMeter says; empty when
// not even the amount fits.
std::string laid_out(ProgressParts& parts, int width) {
  // Room for the echo of a Ctrl-C ("^C") after the line, and the last column left free: a line
  // that reaches it wraps on many terminals, and each redraw then leaves a line behind.
  const int room = std::max(width - 3, 0);
  const auto length = [&] {
    return static_cast<int>(parts.amount.length() + parts.elapsed.length() +
                            parts.current_rate.length() + parts.average.length() +
                            parts.percent.length() + parts.eta.length());
  };
  // " [" + bar + "]"
  const auto bar_room = [&] { return room - length() - 3; };
  // Whole parts are left out, least useful first: the bar shrinks first, then the average, the
  // ETA and the elapsed time go, then the bar, the current rate and the percentage.
  bool bar = parts.done.has_value();
  for (Field* part : {&parts.average, &parts.eta, &parts.elapsed}) {
    if (bar ? bar_room() >= kMinBarWidth : length() <= room) break;
    part->shown = false;
  }
  bar = bar && bar_room() >= kMinBarWidth;
  for (Field* part : {&parts.current_rate, &parts.percent}) {
    if (length() <= room) break;
    part->shown = false;
  }
  if (length() > room) return {};

  std::string line = parts.amount.text;
  for (const Field* part : {&parts.elapsed, &parts.current_rate, &parts.average}) {
    if (part->shown) line += part->text;
  }
  if (bar) {
    const int bar_width = std::min(kMaxBarWidth, bar_room());
    const int filled = static_cast<int>(*parts.done * bar_width);
    line += fmt::format(" [{:=<{}}{:<{}}]", "", filled, filled < bar_width ? ">" : "",
                        bar_width - filled);
  }
  for (const Field* part : {&parts.percent, &parts.eta}) {
    if (part->shown) line += part->text;
  }
  return line;
}

}  // namespace

double ProgressMeter::rate_over_last_second(const Totals& totals) {
  last_second_.push_back({totals.now, totals.units});
  while (last_second_.size() > 2 && totals.now - last_second_[1].time >= std::chrono::seconds(1))
    last_second_.pop_front();
  const Sample& oldest = last_second_.front();
  const double window = seconds(totals.now - oldest.time);
  return window > 0.0 ? static_cast<double>(totals.units - oldest.units) / window
                      : average_rate(totals);
}

std::string ProgressMeter::line(const Totals& totals, int width) {
  const double current = rate_over_last_second(totals);
  ProgressParts parts = parts_of(totals, current, notation_, total_units_);
  return laid_out(parts, width);
}

namespace {

// Guava's first acquire is free: over a few chunks the average is above the rate.
bool average_above_rate(const Totals& totals) { return average_rate(totals) > totals.rate; }

}  // namespace

std::string summary_text(const Result& result, const format::Notation& notation) {
  const Totals& totals = result.totals;
  std::string line = fmt::format(
      "ratelimit: {} {} in {:.3f} s, {} (rate {}{})", totals.units,
      format::counted_name(notation.counted, static_cast<double>(totals.units)),
      seconds(totals.now - totals.started), format::measured_rate(average_rate(totals), notation),
      format::written_rate(totals.rate, notation),
      average_above_rate(totals) ? "; the first chunk is free" : "");
  if (notation.counted != format::Counted::bytes) line += fmt::format(", {} bytes", totals.bytes);
  if (!result.quotas.empty())
    line += fmt::format("; held by quotas {}", format::human_duration(totals.held_by_quotas));
  for (const auto& [key, held] : totals.held_by_keys)
    line += fmt::format("; held by key '{}' {}", format::escaped_bytes(key),
                        format::human_duration(held));
  for (const KeyQuotaStatus& quota : result.quotas)
    line += fmt::format("\nratelimit: quota {}{}: {} used in the window",
                        format::written_quota(quota.quota.params, notation),
                        quota.key.empty()
                            ? std::string()
                            : fmt::format(" of key '{}'", format::escaped_bytes(quota.key)),
                        quota.quota.used);
  return line;
}

std::string summary_json(const Result& result, const format::Notation& notation,
                         std::chrono::nanoseconds unix_time_at_clock_zero) {
  format::Json changes = format::Json::array();
  for (const RateChange& change : result.rate_changes) {
    const format::Json listed = {
        {"unix_time", format::json_number(seconds(change.at + unix_time_at_clock_zero), 3)},
        {"rate", format::json_number(change.rate)},
        {"rate_text", format::written_rate(change.rate, notation)}};
    changes.push_back(listed);
  }
  format::Json quotas = format::Json::array();
  for (const KeyQuotaStatus& quota : result.quotas) {
    format::Json listed = {
        {"quota", format::written_quota(quota.quota.params, notation)},
        {"limit", quota.quota.params.limit},
        {"period_seconds", format::json_number(seconds(quota.quota.params.period))},
        {"used", quota.quota.used}};
    if (!quota.key.empty()) listed["key"] = format::escaped_bytes(quota.key);
    quotas.push_back(listed);
  }
  const Totals& totals = result.totals;
  format::Json summary = {
      {"unit", format::counted_name(notation.counted)},
      {"units", totals.units},
      {"bytes", totals.bytes},
      {"seconds", format::json_number(seconds(totals.now - totals.started), 6)},
      {"average_rate", format::json_number(average_rate(totals), 3)},
      {"rate", format::json_number(totals.rate)},
      {"rate_text", format::written_rate(totals.rate, notation)},
      {"average_above_rate", average_above_rate(totals)},
      {"ending", ending_name(result.ending)},
      {"rate_changes", changes},
      {"quotas", quotas},
      {"held_by_quotas_seconds", format::json_number(seconds(totals.held_by_quotas), 6)}};
  if (!totals.held_by_keys.empty()) {
    format::Json keys = format::Json::object();
    for (const auto& [key, held] : totals.held_by_keys)
      keys[format::escaped_bytes(key)] = format::json_number(seconds(held), 6);
    summary["held_by_keys_seconds"] = keys;
  }
  return summary.dump();
}

}  // namespace ratelimit::pipe
