#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "io/local_time_posix.hpp"
#include "control/control.hpp"
#include "schedule/timetable_text.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::cli {
namespace {

struct StatusOptions {
  StoreOptions store;
  std::string key;  // empty: every bucket
  bool json = false;
};

double seconds(std::chrono::nanoseconds duration) {
  return std::chrono::duration<double>(duration).count();
}

// A key as the terminal should show it: control bytes, backslash and DEL as \xNN.
std::string printable(const std::string& key) {
  std::string shown;
  for (const char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == '\\')
      shown += fmt::format("\\x{:02x}", byte);
    else
      shown += c;
  }
  return shown;
}

// A JSON string: quotes, backslashes and control bytes escaped.
std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\')
      quoted += fmt::format("\\{}", c);
    else if (byte < 0x20 || byte == 0x7f)
      quoted += fmt::format("\\u{:04x}", byte);
    else
      quoted += c;
  }
  return quoted + "\"";
}

std::string describe_shape(const BucketParams& params) {
  std::string shape =
      params.shape == BucketShape::warming_up
          ? fmt::format("warmup {} x{:g}", human_duration(params.warmup), params.cold_factor)
          : fmt::format("burst {}",
                        human_duration(std::chrono::duration<double>(params.max_burst_seconds)));
  if (params.start_full) shape += " start-full";
  if (params.pay_first) shape += " pay-first";
  return shape;
}

std::string describe_next_free(std::chrono::nanoseconds next_free_in) {
  if (next_free_in <= std::chrono::nanoseconds::zero()) return "now";
  // A booking at a vanishing rate saturates near 292 years: no one waits for it.
  constexpr std::chrono::nanoseconds kCentury = std::chrono::hours(24 * 36525);
  if (next_free_in > kCentury) return "in over 100 years";
  return "in " + human_duration(next_free_in);
}

// A pipe's rate as written: "off" for no limit.
std::string pipe_rate(const pipe::PipeStatus& status) {
  if (std::isinf(status.rate)) return "off";
  return human_rate(status.rate, status.counts_bytes ? "B" : "");
}

// Where a key's timetable stands, in local time (TZ honoured).
struct TimetableNow {
  std::string entry;       // in force, e.g. "18:00,10M"
  std::string next_entry;  // the next one, e.g. "Mon-08:00,512k"
  std::chrono::sys_seconds next_change;
  std::chrono::nanoseconds next_change_in{0};
};

// None for a key without a timetable; entries empty for a timetable this version cannot read.
std::optional<TimetableNow> timetable_now(const backends::KeySchedule& schedule) {
  if (schedule.timetable.empty()) return std::nullopt;
  const std::optional<Timetable> timetable = schedule::parse_timetable_text(schedule.timetable);
  if (!timetable) return TimetableNow{};
  const auto now = std::chrono::system_clock::now();
  const io::LocalTimeZone zone;
  const TimetablePeriod period = timetable->at(std::chrono::floor<std::chrono::seconds>(now), zone);
  const TimetablePeriod next = timetable->at(period.next_change, zone);
  const auto as_written = [](double rate) { return human_rate(rate); };
  return TimetableNow{
      .entry = schedule::entry_text(timetable->entries()[period.entry], as_written),
      .next_entry = schedule::entry_text(timetable->entries()[next.entry], as_written),
      .next_change = period.next_change,
      .next_change_in =
          std::chrono::duration_cast<std::chrono::nanoseconds>(period.next_change - now)};
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t column = 0; column < row.size(); ++column)
      widths[column] = std::max(widths[column], row[column].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t column = 0; column < row.size(); ++column) {
      line += column + 1 == row.size() ? row[column]
                                       : fmt::format("{:<{}}  ", row[column], widths[column]);
    }
    fmt::print("{}\n", line);
  }
}

void print_text(const std::vector<backends::BucketStatus>& buckets,
                const std::vector<pipe::ListedPipe>& pipes) {
  std::vector<std::vector<std::string>> rows = {{"KEY", "RATE", "SHAPE", "STORED", "NEXT FREE"}};
  const bool timetables = std::any_of(buckets.begin(), buckets.end(), [](const auto& bucket) {
    return bucket.problem.empty() && !bucket.schedule.timetable.empty();
  });
  if (timetables) rows.front().insert(rows.front().end(), {"TIMETABLE ENTRY", "NEXT ENTRY"});
  std::vector<std::string> unusable;
  for (const auto& bucket : buckets) {
    if (!bucket.problem.empty()) {
      unusable.push_back(fmt::format("{}: unusable ({}): fresh on next use", printable(bucket.key),
                                     bucket.problem));
      continue;
    }
    rows.push_back({printable(bucket.key), human_rate(bucket.params.permits_per_second),
                    describe_shape(bucket.params), fmt::format("{:.2f}", bucket.stored_permits),
                    describe_next_free(bucket.next_free_in)});
    if (!timetables) continue;
    const std::optional<TimetableNow> timetable = timetable_now(bucket.schedule);
    if (!timetable)
      rows.back().insert(rows.back().end(), {"-", "-"});
    else if (timetable->entry.empty())
      rows.back().insert(rows.back().end(), {"(unreadable)", "-"});
    else
      rows.back().insert(
          rows.back().end(),
          {timetable->entry, fmt::format("{} {}", timetable->next_entry,
                                         describe_next_free(timetable->next_change_in))});
  }
  print_table(rows);
  for (const std::string& line : unusable) fmt::print("{}\n", line);
  if (pipes.empty()) return;
  fmt::print("\n");
  std::vector<std::vector<std::string>> pipe_rows = {
      {"PIPE PID", "COUNTS", "RATE", "UNITS", "BYTES"}};
  for (const pipe::ListedPipe& pipe : pipes) {
    std::vector<std::string> row = {std::to_string(pipe.pid),
                                    pipe.counts_bytes ? "bytes" : "records"};
    // A pipe that has not yet said anything (it has just started) shows its FIFO only.
    if (pipe.status) {
      row.insert(row.end(), {pipe_rate(*pipe.status), std::to_string(pipe.status->units),
                             std::to_string(pipe.status->bytes)});
    } else {
      row.insert(row.end(), {"-", "-", "-"});
    }
    pipe_rows.push_back(std::move(row));
  }
  print_table(pipe_rows);
}

void print_json(const std::vector<backends::BucketStatus>& buckets,
                const std::vector<pipe::ListedPipe>& pipes) {
  std::vector<std::string> objects;
  for (const auto& bucket : buckets) {
    if (!bucket.problem.empty()) {
      objects.push_back(fmt::format(R"({{"key":{},"problem":{}}})", json_string(bucket.key),
                                    json_string(bucket.problem)));
      continue;
    }
    const BucketParams& params = bucket.params;
    const std::string shape =
        params.shape == BucketShape::warming_up
            ? fmt::format(R"("shape":"warming_up","warmup_seconds":{},"cold_factor":{})",
                          seconds(params.warmup), params.cold_factor)
            : fmt::format(R"("shape":"bursty","burst_seconds":{})", params.max_burst_seconds);
    std::string terms =
        fmt::format(R"("start_full":{},"pay_first":{})", params.start_full, params.pay_first);
    if (const std::optional<TimetableNow> timetable = timetable_now(bucket.schedule)) {
      terms += fmt::format(R"(,"timetable":{})", json_string(bucket.schedule.timetable));
      if (!timetable->entry.empty())
        terms += fmt::format(R"(,"timetable_entry":{},"next_entry":{},"next_change_unix_time":{},)"
                             R"("next_change_in_seconds":{})",
                             json_string(timetable->entry), json_string(timetable->next_entry),
                             timetable->next_change.time_since_epoch().count(),
                             std::max(0.0, seconds(timetable->next_change_in)));
    }
    objects.push_back(
        fmt::format(R"({{"key":{},"rate":{},"permits_per_second":{},{},{},"stored_permits":{},)"
                    R"("next_free_in_seconds":{}}})",
                    json_string(bucket.key), json_string(human_rate(params.permits_per_second)),
                    params.permits_per_second, shape, terms, bucket.stored_permits,
                    std::max(0.0, seconds(bucket.next_free_in))));
  }
  std::vector<std::string> pipe_objects;
  for (const pipe::ListedPipe& pipe : pipes) {
    std::string object = fmt::format(R"({{"pid":{},"counts":"{}")", pipe.pid,
                                     pipe.counts_bytes ? "bytes" : "records");
    if (const auto& status = pipe.status) {
      // JSON has no infinity: no limit is a null rate per second.
      const std::string per_second =
          std::isinf(status->rate) ? "null" : fmt::format("{}", status->rate);
      object +=
          fmt::format(R"(,"rate":{},"units_per_second":{},"units":{},"bytes":{})",
                      json_string(pipe_rate(*status)), per_second, status->units, status->bytes);
    }
    pipe_objects.push_back(object + "}");
  }
  fmt::print("{{\"buckets\":[{}],\"pipes\":[{}]}}\n", fmt::join(objects, ","),
             fmt::join(pipe_objects, ","));
}

int run_status(const StatusOptions& options) {
  const std::string path = state_dir_of(options.store);
  // Looking does not create the directory: none means no pipes, and no buckets unless in Redis.
  std::vector<backends::BucketStatus> buckets;
  std::vector<pipe::ListedPipe> pipes;
  if (may_hold_buckets(options.store))
    buckets = open_backend(options.store)
                  ->status(options.key.empty() ? std::nullopt : std::optional(options.key));
  if (options.key.empty() && std::filesystem::exists(path)) pipes = pipe::list_running_pipes(path);
  if (buckets.empty() && !options.key.empty()) {
    fmt::print(stderr, "ratelimit: no bucket '{}' in {}\n", printable(options.key),
               store_of(options.store));
    return exit_no_input;
  }
  if (options.json)
    print_json(buckets, pipes);
  else
    print_text(buckets, pipes);
  return exit_ok;
}

}  // namespace

Command setup_status(CLI::App& app) {
  auto options = std::make_shared<StatusOptions>();
  CLI::App* status = app.add_subcommand("status", "List the shared buckets and the running pipes");
  add_store_options(*status, options->store);
  add_key_option(*status, options->key)->description("Show only this bucket");
  status->add_flag("--json", options->json, "Print one JSON object, for scripts");
  status->footer(R"(Examples:
  ratelimit status                  every shared bucket, and the running pipes
  ratelimit status --key api        one bucket
  ratelimit status --json           the same for scripts)");
  return {status, [options] { return run_status(*options); }};
}

}  // namespace ratelimit::cli
