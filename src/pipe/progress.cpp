#include "pipe/progress.hpp"

#include <fmt/core.h>

#include <algorithm>

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
                             std::optional<std::uint64_t> total_bytes)
    : notation_(notation), total_bytes_(total_bytes) {}

std::string ProgressMeter::line(const Totals& totals, int width) {
  last_second_.push_back({totals.now, totals.units});
  while (last_second_.size() > 2 && totals.now - last_second_[1].time >= std::chrono::seconds(1))
    last_second_.pop_front();
  const Sample& oldest = last_second_.front();
  const double window = seconds(totals.now - oldest.time);
  const double current = window > 0.0 ? static_cast<double>(totals.units - oldest.units) / window
                                      : average_rate(totals);

  const std::string done_so_far =
      format::measured_amount(static_cast<double>(totals.units), notation_);
  const std::string elapsed_text = fmt::format(" {}", clock_time(totals.now - totals.started));
  const std::string current_text = fmt::format(" [{}{}]", format::measured_rate(current, notation_),
                                               totals.held_by_quota ? ", held by a quota" : "");
  const std::string average_text =
      fmt::format(" [avg {}]", format::measured_rate(average_rate(totals), notation_));
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

namespace {

// Guava's first acquire is free: over a few chunks the average is above the rate.
bool average_above_rate(const Totals& totals) { return average_rate(totals) > totals.rate; }

}  // namespace

std::string summary_text(const Result& result, const format::Notation& notation) {
  const Totals& totals = result.totals;
  std::string line =
      fmt::format("ratelimit: {} {} in {:.3f} s, {} (rate {}{})", totals.units,
                  format::counted_name(notation.counted), seconds(totals.now - totals.started),
                  format::measured_rate(average_rate(totals), notation),
                  format::written_rate(totals.rate, notation),
                  average_above_rate(totals) ? "; the first chunk is free" : "");
  if (notation.counted != format::Counted::bytes) line += fmt::format(", {} bytes", totals.bytes);
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
  const Totals& totals = result.totals;
  const format::Json summary = {
      {"unit", format::counted_name(notation.counted)},
      {"units", totals.units},
      {"bytes", totals.bytes},
      {"seconds", format::json_number(seconds(totals.now - totals.started), 6)},
      {"average_rate", format::json_number(average_rate(totals), 3)},
      {"rate", format::json_number(totals.rate)},
      {"rate_text", format::written_rate(totals.rate, notation)},
      {"average_above_rate", average_above_rate(totals)},
      {"ending", ending_name(result.ending)},
      {"rate_changes", changes}};
  return summary.dump();
}

}  // namespace ratelimit::pipe
