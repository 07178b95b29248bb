#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent.hpp"
#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/units.hpp"
#include "control/control.hpp"
#include "format/escaping.hpp"
#include "format/json.hpp"
#include "format/quantities.hpp"
#include "format/timetable_text.hpp"
#include "io/local_time_posix.hpp"
#include "io/posix.hpp"
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

// How the key's users wrote its rate, if a user said so.
std::optional<format::Notation> notation_of_key(const stores::BucketStatus& bucket) {
  return format::notation_of_text(bucket.notation);
}

// A key that limits only by its quotas (no --rate): no rate, so no shape either.
bool rate_off(const stores::BucketStatus& bucket) {
  return std::isinf(bucket.params.permits_per_second) && bucket.schedule.timetable.empty();
}

// The key's rate (or `other_rate`) in its notation: "10MB/s", "20 lines/s", "2/s"; as a count per
// period without one ("10M/s").
std::string key_rate(const stores::BucketStatus& bucket,
                     std::optional<double> other_rate = std::nullopt) {
  const double rate = other_rate.value_or(bucket.params.permits_per_second);
  const std::optional<format::Notation> notation = notation_of_key(bucket);
  if (!notation || notation->counted == format::Counted::permits)
    return format::written_rate(rate, notation.value_or(format::Notation{}));
  return format::rate_with_unit(rate, *notation);
}

// The burst as its users wrote it: an amount ("5", "64KiB") or a time ("2s", "2m").
std::string key_burst(const stores::BucketStatus& bucket) {
  const BucketParams& params = bucket.params;
  const std::optional<format::Notation> notation = notation_of_key(bucket);
  if (notation && notation->burst_in_units)
    return format::written_burst(params.max_burst_seconds, params.permits_per_second, *notation);
  return format::human_duration(std::chrono::duration<double>(params.max_burst_seconds));
}

// A quota of the key in the key's notation ("50GB/d"), else as permits ("5000/h").
std::string key_quota(const stores::BucketStatus& bucket, const stores::QuotaStatus& quota) {
  return format::written_quota(quota.params, notation_of_key(bucket).value_or(format::Notation{}));
}

std::string describe_shape(const stores::BucketStatus& bucket) {
  if (rate_off(bucket)) return "-";
  const BucketParams& params = bucket.params;
  std::string shape = params.shape == BucketShape::warming_up
                          ? fmt::format("warmup {} x{:g}", format::human_duration(params.warmup),
                                        params.cold_factor)
                          : fmt::format("burst {}", key_burst(bucket));
  if (params.start_full) shape += " start-full";
  if (params.pay_first) shape += " pay-first";
  return shape;
}

std::string describe_next_free(std::chrono::nanoseconds next_free_in) {
  if (next_free_in <= std::chrono::nanoseconds::zero()) return "now";
  // A booking at a vanishing rate saturates near 292 years: no one waits for it.
  constexpr std::chrono::nanoseconds kCentury = std::chrono::hours(24 * 36525);
  if (next_free_in > kCentury) return "in over 100 years";
  return "in " + format::human_duration(next_free_in);
}

// "api: backing off: rate in force 14/s of 20/s, paused for 3s more, 6 throttles, the last 0.5s
// ago".
std::string describe_backoff(const stores::BucketStatus& bucket) {
  return fmt::format("{}: backing off: rate in force {} of {}{}, {} throttle{}, the last {} ago",
                     format::escaped_bytes(bucket.key), key_rate(bucket, bucket.rate_in_force),
                     key_rate(bucket),
                     bucket.paused_for > std::chrono::nanoseconds::zero()
                         ? ", paused for " + format::human_duration(bucket.paused_for) + " more"
                         : std::string(),
                     bucket.throttles, bucket.throttles == 1 ? "" : "s",
                     format::human_duration(bucket.last_throttle_ago));
}

// Where a key's timetable stands, in local time (TZ honoured).
struct TimetableNow {
  std::string entry;       // in force, e.g. "18:00,10M"
  double rate = 0.0;       // the entry's, units per second
  std::string next_entry;  // the next one, e.g. "Mon-08:00,512k"
  std::chrono::sys_seconds next_change;
  std::chrono::nanoseconds next_change_in{0};
};

// None for a key without a timetable; entries empty for a timetable this version cannot read.
std::optional<TimetableNow> timetable_now(const std::string& text,
                                          const format::Notation& notation = {}) {
  if (text.empty()) return std::nullopt;
  const std::optional<Timetable> timetable = format::parse_timetable_text(text);
  if (!timetable) return TimetableNow{};
  const auto now = std::chrono::system_clock::now();
  const io::LocalTimeZone zone;
  const TimetablePeriod period = timetable->at(std::chrono::floor<std::chrono::seconds>(now), zone);
  const TimetablePeriod next = timetable->at(period.next_change, zone);
  const auto as_written = [&notation](double rate) { return format::written_rate(rate, notation); };
  return TimetableNow{
      .entry = format::entry_text(timetable->entries()[period.entry], as_written),
      .rate = period.permits_per_second,
      .next_entry = format::entry_text(timetable->entries()[next.entry], as_written),
      .next_change = period.next_change,
      .next_change_in =
          std::chrono::duration_cast<std::chrono::nanoseconds>(period.next_change - now)};
}

// What a pipe counts as its FIFO's name tells: bytes or records (lines among them).
std::string fifo_counts(const control::ListedPipe& pipe) {
  return pipe.counts_bytes ? "bytes" : "records";
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

// Whether a key's rate is not yet the one of the entry in force here: nobody has used the key
// since the entry began (the first user past a change moves the key on), or the users that did
// read the timetable in another time zone.
bool entry_pending(const TimetableNow& timetable, double key_rate) {
  return !timetable.entry.empty() && timetable.rate != key_rate;
}

// The TIMETABLE ENTRY and NEXT ENTRY columns of a bucket or a pipe following `text`; with
// `key_rate`, the entry is said to apply from the next use when the key's rate is not its.
std::vector<std::string> timetable_columns(const std::string& text,
                                           const format::Notation& notation = {},
                                           std::optional<double> key_rate = std::nullopt) {
  const std::optional<TimetableNow> timetable = timetable_now(text, notation);
  if (!timetable) return {"-", "-"};
  if (timetable->entry.empty()) return {"(unreadable)", "-"};
  return {
      timetable->entry + (key_rate && entry_pending(*timetable, *key_rate) ? " from next use" : ""),
      fmt::format("{} {}", timetable->next_entry, describe_next_free(timetable->next_change_in))};
}

// A pipe's KEY column: its key, or its keys "a,b" (several).
std::string pipe_keys_text(const control::PipeStatus& status) {
  if (status.key.empty()) return "-";
  if (status.keys.size() < 2) return format::escaped_bytes(status.key);
  std::string text;
  for (const control::KeyHeld& key : status.keys)
    text += (text.empty() ? "" : ",") + format::escaped_bytes(key.key);
  return text;
}

// "pipe 123: waits for key 'all'; held by key 'host:a' 0.2s, key 'all' 3.1s" (several keys), and
// of a waiting call "acquire 123: waits for key 'all' (2.5s left); held by key 'a' 0s, key 'all'
// 3s" (`left`: the time left).
std::string describe_key_waits(std::string_view what, long pid, const std::string& held_by,
                               const std::vector<control::KeyHeld>& keys,
                               const std::string& left = {}) {
  std::string line = fmt::format(
      "{} {}: {}", what, pid,
      held_by.empty() ? std::string("waits for no key")
                      : fmt::format("waits for key '{}'", format::escaped_bytes(held_by)));
  if (!left.empty()) line += fmt::format(" ({} left)", left);
  for (std::size_t i = 0; i < keys.size(); ++i)
    line += fmt::format(
        "{} key '{}' {}", i == 0 ? "; held by" : ",", format::escaped_bytes(keys[i].key),
        format::human_duration(std::chrono::duration<double>(keys[i].held_seconds)));
  return line;
}

// How long a waiting call has left to wait, as of now; none when not known (a slot).
std::optional<std::chrono::nanoseconds> wait_left(const control::CallStatus& call) {
  if (call.until == std::chrono::nanoseconds::max()) return std::nullopt;
  return std::max(std::chrono::nanoseconds::zero(), call.until - io::monotonic_now());
}

// A waiting call of several keys: for its turn as describe_key_waits() says it; for a slot
// "exec 123: waits for a --max-inflight slot of key 'a'; keys 'a', 'all'"; for a pause
// "acquire 123: waits for the pause of key 'all' (1.5s left); keys 'a', 'all'".
std::string describe_call(const control::ListedCall& call) {
  const control::CallStatus& status = call.status;
  const std::optional<std::chrono::nanoseconds> left = wait_left(status);
  const std::string left_text = left ? format::human_duration(*left) : std::string();
  if (status.waits_for == control::CallWait::turn)
    return describe_key_waits(status.command, call.pid, status.held_by, status.keys, left_text);
  std::string line = fmt::format(
      "{} {}: waits for {} of key '{}'", status.command, call.pid,
      status.waits_for == control::CallWait::slot ? "a --max-inflight slot" : "the pause",
      format::escaped_bytes(status.held_by));
  if (left) line += fmt::format(" ({} left)", left_text);
  for (std::size_t i = 0; i < status.keys.size(); ++i)
    line +=
        fmt::format("{} '{}'", i == 0 ? "; keys" : ",", format::escaped_bytes(status.keys[i].key));
  return line;
}

void print_text(const std::vector<stores::BucketStatus>& buckets,
                const std::vector<control::ListedPipe>& pipes,
                const std::vector<control::ListedCall>& calls) {
  if (buckets.empty() && pipes.empty() && calls.empty()) {
    fmt::print("no pipes or keys\n");
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"KEY", "RATE", "SHAPE", "STORED", "NEXT FREE"}};
  const bool timetables = std::any_of(buckets.begin(), buckets.end(), [](const auto& bucket) {
    return bucket.problem.empty() && !bucket.schedule.timetable.empty();
  });
  if (timetables) rows.front().insert(rows.front().end(), {"TIMETABLE ENTRY", "NEXT ENTRY"});
  std::vector<std::string> unusable;
  std::vector<std::string> quotas;
  for (const auto& bucket : buckets) {
    if (!bucket.problem.empty()) {
      unusable.push_back(fmt::format("{}: unusable ({}): fresh on next use",
                                     format::escaped_bytes(bucket.key), bucket.problem));
      continue;
    }
    rows.push_back({format::escaped_bytes(bucket.key), key_rate(bucket), describe_shape(bucket),
                    rate_off(bucket) ? "-" : format::stored_count(bucket.stored_permits),
                    describe_next_free(bucket.next_free_in)});
    for (const stores::QuotaStatus& quota : bucket.quotas)
      quotas.push_back(fmt::format("{}: quota {}: {} used in the window, next unit free {}",
                                   format::escaped_bytes(bucket.key), key_quota(bucket, quota),
                                   quota.used, describe_next_free(quota.next_free_in)));
    if (bucket.throttles > 0) quotas.push_back(describe_backoff(bucket));
    if (!timetables) continue;
    const std::vector<std::string> columns = timetable_columns(
        bucket.schedule.timetable, notation_of_key(bucket).value_or(format::Notation{}),
        bucket.params.permits_per_second);
    rows.back().insert(rows.back().end(), columns.begin(), columns.end());
  }
  if (!buckets.empty()) print_table(rows);
  for (const std::string& line : quotas) fmt::print("{}\n", line);
  for (const std::string& line : unusable) fmt::print("{}\n", line);
  // The calls of several keys waiting for a slot, their turn or a pause come with the keys.
  for (const control::ListedCall& call : calls) fmt::print("{}\n", describe_call(call));
  if (pipes.empty()) return;
  if (!buckets.empty() || !calls.empty()) fmt::print("\n");
  std::vector<std::vector<std::string>> pipe_rows = {
      {"PIPE PID", "COUNTS", "RATE", "UNITS", "BYTES", "KEY"}};
  std::vector<std::string> key_waits;
  const bool pipe_timetables = std::any_of(pipes.begin(), pipes.end(), [](const auto& pipe) {
    return pipe.status && !pipe.status->timetable.empty();
  });
  if (pipe_timetables)
    pipe_rows.front().insert(pipe_rows.front().end(), {"TIMETABLE ENTRY", "NEXT ENTRY"});
  for (const control::ListedPipe& pipe : pipes) {
    // A pipe that has not yet said anything (it has just started) shows its FIFO only.
    if (!pipe.status) {
      pipe_rows.push_back({std::to_string(pipe.pid), fifo_counts(pipe), "-", "-", "-", "-"});
      if (pipe_timetables) pipe_rows.back().insert(pipe_rows.back().end(), {"-", "-"});
      continue;
    }
    const control::PipeStatus& status = *pipe.status;
    pipe_rows.push_back(
        {std::to_string(pipe.pid), std::string(format::counted_name(status.notation.counted)),
         format::written_rate(status.rate, status.notation), std::to_string(status.units),
         std::to_string(status.bytes), pipe_keys_text(status)});
    if (status.keys.size() > 1)
      key_waits.push_back(describe_key_waits("pipe", pipe.pid, status.held_by, status.keys));
    if (!pipe_timetables) continue;
    const std::vector<std::string> columns = timetable_columns(status.timetable, status.notation);
    pipe_rows.back().insert(pipe_rows.back().end(), columns.begin(), columns.end());
  }
  print_table(pipe_rows);
  for (const std::string& line : key_waits) fmt::print("{}\n", line);
}

// "key" as JSON can carry it, and "key_hex" with its exact bytes when they are not UTF-8.
void add_key(format::Json& object, const std::string& key) {
  object["key"] = format::json_text(key);
  if (!format::is_utf8(key)) object["key_hex"] = format::hex_bytes(key);
}

// The timetable followed, if any, and where it stands now.
void add_timetable(format::Json& object, const std::string& text,
                   const format::Notation& notation = {},
                   std::optional<double> key_rate = std::nullopt) {
  const std::optional<TimetableNow> timetable = timetable_now(text, notation);
  if (!timetable) return;
  object["timetable"] = format::json_text(text);
  if (timetable->entry.empty()) return;
  object["timetable_entry"] = timetable->entry;
  object["next_entry"] = timetable->next_entry;
  object["next_change_unix_time"] = timetable->next_change.time_since_epoch().count();
  object["next_change_in_seconds"] =
      format::json_number(std::max(0.0, seconds(timetable->next_change_in)));
  if (key_rate) object["entry_from_next_use"] = entry_pending(*timetable, *key_rate);
}

format::Json bucket_json(const stores::BucketStatus& bucket) {
  format::Json object;
  add_key(object, bucket.key);
  if (!bucket.problem.empty()) {
    object["problem"] = format::json_text(bucket.problem);
    return object;
  }
  const BucketParams& params = bucket.params;
  const std::optional<format::Notation> notation = notation_of_key(bucket);
  object["rate"] =
      format::written_rate(params.permits_per_second, notation.value_or(format::Notation{}));
  if (notation) object["counts"] = format::counted_name(notation->counted);
  object["permits_per_second"] = format::json_number(params.permits_per_second);
  if (rate_off(bucket)) {
    object["shape"] = nullptr;
  } else if (params.shape == BucketShape::warming_up) {
    object["shape"] = "warming_up";
    object["warmup_seconds"] = format::json_number(seconds(params.warmup));
    object["cold_factor"] = format::json_number(params.cold_factor);
  } else {
    object["shape"] = "bursty";
    object["burst"] = key_burst(bucket);
    object["burst_seconds"] = format::json_number(params.max_burst_seconds);
  }
  object["start_full"] = params.start_full;
  object["pay_first"] = params.pay_first;
  add_timetable(object, bucket.schedule.timetable, notation.value_or(format::Notation{}),
                params.permits_per_second);
  object["stored_permits"] = format::json_number(bucket.stored_permits);
  object["next_free_in_seconds"] = format::json_number(std::max(0.0, seconds(bucket.next_free_in)));
  // Only on a key ever throttled.
  if (bucket.throttles > 0)
    object["backoff"] = {
        {"permits_per_second_in_force", format::json_number(bucket.rate_in_force)},
        {"paused_for_seconds", format::json_number(seconds(bucket.paused_for))},
        {"throttles", bucket.throttles},
        {"last_throttle_seconds_ago", format::json_number(seconds(bucket.last_throttle_ago))}};
  object["quotas"] = format::Json::array();
  for (const stores::QuotaStatus& quota : bucket.quotas)
    object["quotas"].push_back(
        {{"quota", key_quota(bucket, quota)},
         {"limit", quota.params.limit},
         {"period_seconds", format::json_number(seconds(quota.params.period))},
         {"used", quota.used},
         {"next_free_in_seconds",
          format::json_number(std::max(0.0, seconds(quota.next_free_in)))}});
  return object;
}

// The keys of a pipe or a call, each with how long it held it.
format::Json keys_json(const std::vector<control::KeyHeld>& keys) {
  format::Json listed_keys = format::Json::array();
  for (const control::KeyHeld& key : keys) {
    format::Json listed = format::Json::object();
    add_key(listed, key.key);
    listed["held_seconds"] = format::json_number(key.held_seconds, 3);
    listed_keys.push_back(listed);
  }
  return listed_keys;
}

format::Json pipe_json(const control::ListedPipe& pipe) {
  format::Json object = {{"pid", pipe.pid}, {"counts", fifo_counts(pipe)}};
  if (const auto& status = pipe.status) {
    object["counts"] = format::counted_name(status->notation.counted);
    object["rate"] = format::written_rate(status->rate, status->notation);
    object["units_per_second"] = format::json_number(status->rate);
    object["units"] = status->units;
    object["bytes"] = status->bytes;
    if (status->key.empty())
      object["key"] = nullptr;
    else
      add_key(object, status->key);
    if (status->keys.size() > 1) {
      object["keys"] = keys_json(status->keys);
      object["held_by"] =
          status->held_by.empty() ? format::Json(nullptr) : format::json_text(status->held_by);
    }
    add_timetable(object, status->timetable, status->notation);
  }
  return object;
}

format::Json call_json(const control::ListedCall& call) {
  const std::optional<std::chrono::nanoseconds> left = wait_left(call.status);
  return {
      {"pid", call.pid},
      {"command", call.status.command},
      {"waits_for", std::string(control::call_wait_name(call.status.waits_for))},
      {"keys", keys_json(call.status.keys)},
      {"held_by", format::json_text(call.status.held_by)},
      {"wait_left_seconds", left ? format::json_number(seconds(*left), 3) : format::Json(nullptr)}};
}

// The host agent: null when none runs.
format::Json agent_json(const std::optional<agent::AgentReport>& agent) {
  if (!agent) return nullptr;
  return {
      {"pid", agent->pid}, {"connections", agent->connections}, {"decisions", agent->decisions}};
}

void print_json(const std::vector<stores::BucketStatus>& buckets,
                const std::vector<control::ListedPipe>& pipes,
                const std::vector<control::ListedCall>& calls,
                const std::optional<agent::AgentReport>& agent) {
  format::Json status = {{"buckets", format::Json::array()},
                         {"pipes", format::Json::array()},
                         {"calls", format::Json::array()},
                         {"agent", agent_json(agent)}};
  for (const auto& bucket : buckets) status["buckets"].push_back(bucket_json(bucket));
  for (const control::ListedPipe& pipe : pipes) status["pipes"].push_back(pipe_json(pipe));
  for (const control::ListedCall& call : calls) status["calls"].push_back(call_json(call));
  fmt::print("{}\n", status.dump());
}

std::string agent_text(const agent::AgentReport& agent) {
  return fmt::format("agent: pid {}, {} Redis connection{}, {} decision{} served", agent.pid,
                     agent.connections, agent.connections == 1 ? "" : "s", agent.decisions,
                     agent.decisions == 1 ? "" : "s");
}

int run_status(const StatusOptions& options) {
  const std::string& path = options.store.state_dir;
  // Looking does not create the directory: none means no pipes, and no buckets unless in Redis.
  std::vector<stores::BucketStatus> buckets;
  std::vector<control::ListedPipe> pipes;
  if (may_hold_buckets(options.store))
    buckets = stores::open_store(options.store.stores)
                  ->status(options.key.empty() ? std::nullopt : std::optional(options.key));
  std::vector<control::ListedCall> calls;
  if (options.key.empty() && std::filesystem::exists(path)) {
    pipes = control::list_running_pipes(path);
    calls = control::list_waiting_calls(path);
  }
  if (buckets.empty() && !options.key.empty()) throw no_bucket(options.key, options.store);
  // The host agent of the state directory, if one runs (none is started): in the JSON always,
  // in the text with the whole list.
  std::optional<agent::AgentReport> agent;
  if ((options.json || options.key.empty()) && std::filesystem::exists(path))
    agent = agent::ask_agent(path);
  if (options.json) {
    print_json(buckets, pipes, calls, agent);
    return exit_ok;
  }
  // Nothing listed but the agent: one line that says both.
  if (agent && buckets.empty() && pipes.empty() && calls.empty()) {
    fmt::print("no pipes or keys; {}\n", agent_text(*agent));
    return exit_ok;
  }
  print_text(buckets, pipes, calls);
  if (agent) fmt::print("\n{}\n", agent_text(*agent));
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
