#include "pipe/progress.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

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
  }
  return "";
}

}  // namespace

UnitNames unit_names(const Unit& unit) {
  if (unit.counts_bytes()) return {"B", "bytes"};
  if (*unit.delimiter == '\n') return {"lines", "lines"};
  return {"records", "records"};
}

std::string si_number(double value, bool binary_prefix) {
  static constexpr const char* kSiPrefixes[] = {"", "k", "M", "G", "T"};
  static constexpr const char* kBinaryPrefixes[] = {"", "Ki", "Mi", "Gi", "Ti"};
  const auto& prefixes = binary_prefix ? kBinaryPrefixes : kSiPrefixes;
  const double base = binary_prefix ? 1024.0 : 1000.0;
  std::size_t prefix = 0;
  while (value >= 999.5 && prefix + 1 < std::size(prefixes)) {
    value /= base;
    ++prefix;
  }
  const int decimals = prefix == 0 && value == std::floor(value) ? 0
                       : value < 9.995                           ? 2
                       : value < 99.95                           ? 1
                                                                 : 0;
  return fmt::format("{:.{}f} {}", value, decimals, prefixes[prefix]);
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

ProgressMeter::ProgressMeter(const Unit& unit, std::optional<std::uint64_t> total_bytes,
                             Notation notation)
    : names_(unit_names(unit)),
      notation_{notation.binary_prefix, notation.bits && unit.counts_bytes()},
      total_bytes_(total_bytes) {
  if (notation_.bits) names_.short_name = "bit";
}

std::string ProgressMeter::line(const Totals& totals, int width) {
  last_second_.push_back({totals.now, totals.units});
  while (last_second_.size() > 2 && totals.now - last_second_[1].time >= std::chrono::seconds(1))
    last_second_.pop_front();
  const Sample& oldest = last_second_.front();
  const double window = seconds(totals.now - oldest.time);
  const double current = window > 0.0 ? static_cast<double>(totals.units - oldest.units) / window
                                      : average_rate(totals);

  const double scale = notation_.bits ? 8.0 : 1.0;
  const auto amount = [&](double units) {
    return si_number(units * scale, notation_.binary_prefix) + names_.short_name;
  };
  const std::string done_so_far = amount(static_cast<double>(totals.units));
  const std::string elapsed_text = " " + clock_time(totals.now - totals.started);
  const std::string current_text = " [" + amount(current) + "/s]";
  const std::string average_text = " [avg " + amount(average_rate(totals)) + "/s]";
  std::string percent_text;
  std::string eta_text;
  double done = 0.0;
  const bool known_total = total_bytes_ && *total_bytes_ > 0;
  if (known_total) {
    done = std::min(1.0, static_cast<double>(totals.bytes) / static_cast<double>(*total_bytes_));
    percent_text = fmt::format(" {:3.0f}%", done * 100.0);
    const double elapsed = seconds(totals.now - totals.started);
    if (done > 0.0 && done < 1.0 && elapsed > 0.0) {
      eta_text = " ETA " + clock_time(saturating_nanoseconds(elapsed * (1.0 - done) / done));
    }
  }

  // The parts that may be left out, least useful first.
  const int room = std::max(width - 1, 0);
  bool show_average = true;
  bool show_eta = true;
  bool show_elapsed = true;
  const auto fixed_length = [&] {
    return done_so_far.size() + (show_elapsed ? elapsed_text.size() : 0) + current_text.size() +
           (show_average ? average_text.size() : 0) + percent_text.size() +
           (show_eta ? eta_text.size() : 0);
  };
  // " [" + bar + "]"
  const auto bar_room = [&] { return room - static_cast<int>(fixed_length()) - 3; };
  for (bool* part : {&show_average, &show_eta, &show_elapsed}) {
    if (known_total ? bar_room() >= kMinBarWidth : static_cast<int>(fixed_length()) <= room) break;
    *part = false;
  }

  std::string line = done_so_far + (show_elapsed ? elapsed_text : "") + current_text +
                     (show_average ? average_text : "");
  if (known_total) {
    const int bar_width = std::min(kMaxBarWidth, bar_room());
    if (bar_width >= kMinBarWidth) {
      const int filled = static_cast<int>(done * bar_width);
      line += fmt::format(" [{:=<{}}{:<{}}]", "", filled, filled < bar_width ? ">" : "",
                          bar_width - filled);
    }
    line += percent_text + (show_eta ? eta_text : "");
  }
  if (static_cast<int>(line.size()) > room) line.resize(static_cast<std::size_t>(room));
  return line;
}

std::string summary_text(const Result& result, const Unit& unit) {
  const Totals& totals = result.totals;
  const UnitNames names = unit_names(unit);
  std::string line = fmt::format("ratelimit: {} {} in {:.3f} s, {}{}/s (rate {}{}/s)", totals.units,
                                 names.long_name, seconds(totals.now - totals.started),
                                 si_number(average_rate(totals)), names.short_name,
                                 si_number(totals.rate), names.short_name);
  if (!unit.counts_bytes()) line += fmt::format(", {} bytes", totals.bytes);
  return line;
}

std::string summary_json(const Result& result, const Unit& unit,
                         std::chrono::nanoseconds unix_time_at_clock_zero) {
  // JSON has no infinity: a rate of no limit is null.
  auto json_rate = [](double rate) {
    return std::isinf(rate) ? std::string("null") : fmt::format("{}", rate);
  };
  std::string changes;
  for (const RateChange& change : result.rate_changes) {
    changes += fmt::format(R"({}{{"unix_time":{:.3f},"rate":{}}})", changes.empty() ? "" : ",",
                           seconds(change.at + unix_time_at_clock_zero), json_rate(change.rate));
  }
  const Totals& totals = result.totals;
  return fmt::format(
      R"({{"unit":"{}","units":{},"bytes":{},"seconds":{:.6f},"average_rate":{:.3f},)"
      R"("rate":{},"ending":"{}","rate_changes":[{}]}})",
      unit_names(unit).long_name, totals.units, totals.bytes, seconds(totals.now - totals.started),
      average_rate(totals), json_rate(totals.rate), ending_name(result.ending), changes);
}

}  // namespace ratelimit::pipe
