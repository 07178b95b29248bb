#include "pipe/progress.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace ratelimit::pipe {

using std::chrono::nanoseconds;

namespace {

constexpr int kBarWidth = 20;

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

std::string si_number(double value) {
  static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T"};
  std::size_t prefix = 0;
  while (value >= 999.5 && prefix + 1 < std::size(kPrefixes)) {
    value /= 1000.0;
    ++prefix;
  }
  const int decimals = prefix == 0 && value == std::floor(value) ? 0
                       : value < 9.995                           ? 2
                       : value < 99.95                           ? 1
                                                                 : 0;
  return fmt::format("{:.{}f} {}", value, decimals, kPrefixes[prefix]);
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

ProgressMeter::ProgressMeter(const Unit& unit, std::optional<std::uint64_t> total_bytes)
    : names_(unit_names(unit)), total_bytes_(total_bytes) {}

std::string ProgressMeter::line(const Totals& totals) {
  last_second_.push_back({totals.now, totals.units});
  while (last_second_.size() > 2 && totals.now - last_second_[1].time >= std::chrono::seconds(1))
    last_second_.pop_front();
  const Sample& oldest = last_second_.front();
  const double window = seconds(totals.now - oldest.time);
  const double current = window > 0.0 ? static_cast<double>(totals.units - oldest.units) / window
                                      : average_rate(totals);

  std::string line =
      fmt::format("{}{} {} [{}{}/s] [avg {}{}/s]", si_number(static_cast<double>(totals.units)),
                  names_.short_name, clock_time(totals.now - totals.started), si_number(current),
                  names_.short_name, si_number(average_rate(totals)), names_.short_name);
  if (total_bytes_ && *total_bytes_ > 0) {
    const double done =
        std::min(1.0, static_cast<double>(totals.bytes) / static_cast<double>(*total_bytes_));
    const int filled = static_cast<int>(done * kBarWidth);
    line += fmt::format(" [{:=<{}}{:<{}}] {:3.0f}%", "", filled, filled < kBarWidth ? ">" : "",
                        kBarWidth - filled, done * 100.0);
    const double elapsed = seconds(totals.now - totals.started);
    if (done > 0.0 && done < 1.0 && elapsed > 0.0) {
      line += " ETA " + clock_time(saturating_nanoseconds(elapsed * (1.0 - done) / done));
    }
  }
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

std::string summary_json(const Result& result, const Unit& unit) {
  const Totals& totals = result.totals;
  return fmt::format(
      R"({{"unit":"{}","units":{},"bytes":{},"seconds":{:.6f},"average_rate":{:.3f},)"
      R"("rate":{},"ending":"{}"}})",
      unit_names(unit).long_name, totals.units, totals.bytes, seconds(totals.now - totals.started),
      average_rate(totals), totals.rate, ending_name(result.ending));
}

}  // namespace ratelimit::pipe
