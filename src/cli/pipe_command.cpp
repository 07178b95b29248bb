#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cli/bucket_options.hpp"
#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/help.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/units.hpp"
#include "control/control.hpp"
#include "format/escaping.hpp"
#include "format/timetable_text.hpp"
#include "io/local_time_posix.hpp"
#include "io/posix.hpp"
#include "pipe/engine.hpp"
#include "pipe/files.hpp"
#include "pipe/progress.hpp"
#include "pipe/rate_schedule.hpp"

namespace ratelimit::cli {
namespace {

// Records per write in record modes when --chunk is not given: beyond this, smoothness gains
// nothing and the buffer fills first anyway.
constexpr std::int64_t kMaxRecordsPerChunk = 65536;
// Bytes per write at the highest rates: Linux's default limit for an unprivileged pipe's size.
constexpr std::int64_t kMaxBytesPerChunk = 1 << 20;
// The progress of lines or records counts them ahead in files up to this size (about 0.1 s at
// the limit from the page cache, bench/results/progress.md); beyond, it shows no percentage.
constexpr std::uint64_t kMostBytesCountedAhead = std::uint64_t{64} << 20;

// The keys (KeyGroups::key empty: a bucket of the pipe's own) and the pipe's options.
struct PipeOptions : KeyGroups {
  StoreOptions store;
  std::vector<std::string> files;
  std::string output = "-";
  bool lines = false;
  bool null = false;
  std::optional<char> delimiter;
  // Units per write, or the time between writes; none: the default.
  std::optional<Written<TimeOrAmount>> chunk;
  // The longest wait for a turn (--timeout); none: any.
  std::optional<Written<std::chrono::nanoseconds>> timeout;
  bool stop_at_quota = false;  // end at a turn a quota holds back instead of waiting for it
  // What the input holds in the units counted, for the percentage and ETA of --progress: instead
  // of the files' sizes, or for standard input (pv's -s).
  std::optional<Written<Amount>> size;
  std::string progress;  // empty: none; "auto": on a terminal; "force": always
  std::string stats;     // empty: none; "text" or "json"
};

// "\n", "\t", "\0" and "\\" as escapes, or one character.
char parse_delimiter(const std::string& text) {
  if (text.size() == 1) return text[0];
  if (text == "\\n") return '\n';
  if (text == "\\t") return '\t';
  if (text == "\\0") return '\0';
  if (text == "\\\\") return '\\';
  throw UsageError("invalid delimiter '" + text + "': expected one character or \\n, \\t, \\0");
}

pipe::Unit unit_of(const PipeOptions& options) {
  if (options.lines) return pipe::Unit{'\n'};
  if (options.null) return pipe::Unit{'\0'};
  return pipe::Unit{options.delimiter};
}

// --chunk: a number of units, or a time between writes from 1 ms to 1 min (a chunk of the rate
// then, which follows a new rate).
TimeOrAmount parse_chunk(const std::string& text) {
  TimeOrAmount chunk = parse_time_or_amount(text);
  if (const auto* interval = std::get_if<std::chrono::nanoseconds>(&chunk);
      interval && (*interval < std::chrono::milliseconds(1) || *interval > std::chrono::minutes(1)))
    throw UsageError("invalid chunk '" + text + "': a time between writes must be from 1ms to 1m");
  return chunk;
}

// Sets the chunk: the user's size, or one interval of `slowest_rate` (the lowest rate in force of
// the keys, or the pipe's own) at the user's interval or the default (a shared pipe's bookings in
// byte mode are shorter, for even shares of the key).
void choose_chunk(const PipeOptions& options, double slowest_rate,
                  pipe::EngineOptions& engine_options, pipe::FileIo& io) {
  if (const Amount* units = options.chunk ? std::get_if<Amount>(&options.chunk->value) : nullptr) {
    if (units->units < 1.0 || units->units > 1e9)
      throw UsageError("invalid chunk '" + options.chunk->text + "': must be from 1 to 1G units");
    engine_options.chunk_units = static_cast<std::int64_t>(units->units);
    return;
  }
  if (options.chunk)
    engine_options.chunk_interval = std::get<std::chrono::nanoseconds>(options.chunk->value);
  else if (!options.key.empty() && engine_options.unit.counts_bytes())
    engine_options.chunk_interval = pipe::kSharedByteWriteInterval;
  if (!engine_options.unit.counts_bytes()) {
    engine_options.default_chunk_limit = kMaxRecordsPerChunk;
    return;
  }
  const std::int64_t wanted = engine_options.default_chunk(slowest_rate, kMaxBytesPerChunk);
  engine_options.default_chunk_limit =
      static_cast<std::int64_t>(io.fit_pipes_to(static_cast<std::size_t>(wanted)));
}

// A chunk goes out whole, so none given may be larger than a quota (`quotas` of a key, as
// `bucket` writes them), and the default fits a window closely.
void fit_chunk_to_quotas(const PipeOptions& options, const ParsedBucket& bucket,
                         pipe::EngineOptions& engine_options) {
  for (const QuotaParams& quota : bucket.quotas) {
    if (engine_options.default_chunk_limit) {
      engine_options.default_chunk_limit = std::min(*engine_options.default_chunk_limit,
                                                    pipe::largest_chunk_under_quota(quota.limit));
    } else if (engine_options.chunk_units > quota.limit) {
      throw UsageError(fmt::format("invalid chunk '{}': larger than quota '{}'",
                                   options.chunk->text,
                                   format::written_quota(quota, bucket.notation)));
    }
  }
}

int exit_code(const pipe::Result& result) {
  switch (result.ending) {
    case pipe::Ending::end_of_input:
      return exit_ok;
    case pipe::Ending::downstream_closed:
      return exit_broken_pipe;
    case pipe::Ending::stopped:
      return 128 + result.signal;
    case pipe::Ending::wait_too_long:
    case pipe::Ending::quota_spent:
      return exit_temp_failure;
  }
  return exit_ok;
}

// One --key of the pipe: its options and its bucket (bucket_or_key()).
struct PipeKey {
  KeyOptions options;
  ParsedBucket bucket;
};

// What a pipe's request for `key` is, before the source sizes and times it.
stores::PermitRequest request_of(const PipeKey& key) {
  stores::PermitRequest request;
  request.key = key.options.key;
  request.params = key.bucket.params;
  request.schedule = key.bucket.key_schedule;
  request.quotas = key.bucket.quotas;
  request.notation = format::notation_text(key.bucket.notation);
  return request;
}

// `keys[i].bucket.key_schedule` is what key i is to keep of --rate; `schedules[i]` what the
// engine follows for it (the first: engine_options.schedule, the others: key_schedules), which
// becomes the key's timetable when another user sets one.
// `store` keeps the keys' buckets; none without --key.
pipe::Result run_engine(const PipeOptions& options, const pipe::EngineOptions& engine_options,
                        stores::BucketStore* store, const std::vector<PipeKey>& keys,
                        const std::vector<pipe::TimetableSchedule*>& schedules, pipe::FileIo& io,
                        const pipe::Engine::ProgressCallback& draw) {
  // The quotas are said by --stats only: a shared key's are asked of the store.
  const auto run = [&options](pipe::Engine&& engine) {
    pipe::Result result = engine.run();
    if (!options.stats.empty()) result.quotas = engine.quota_status();
    return result;
  };
  if (!store) return run(pipe::Engine(engine_options, io, draw));
  std::vector<stores::PermitRequest> more_keys;
  for (std::size_t i = 1; i < keys.size(); ++i) more_keys.push_back(request_of(keys[i]));
  const auto key_named = [&keys](const std::string& name) {
    return std::find_if(keys.begin(), keys.end(),
                        [&name](const PipeKey& key) { return key.options.key == name; });
  };
  const auto on_followed = [&](const std::string& name, const stores::KeySettings& key_settings) {
    const auto key = key_named(name);
    if (key == keys.end()) return;
    announce_followed(name, key_settings,
                      {.params = key->bucket.params,
                       .timetable = key->bucket.key_schedule.timetable,
                       .quotas = key->bucket.quotas},
                      key->options.bucket, key->bucket.notation);
  };
  const auto follow_key = [&](const std::string& name, const std::string& text) {
    const auto key = key_named(name);
    if (key == keys.end()) return;
    std::optional<Timetable> timetable = format::parse_timetable_text(text);
    if (text.empty())
      fmt::print(stderr, "ratelimit: key '{}' has no timetable now: its rate holds\n", name);
    else if (!timetable)
      fmt::print(stderr,
                 "ratelimit: warning: key '{}' has a timetable this version cannot read ('{}'): "
                 "its rate holds\n",
                 name, text);
    else
      fmt::print(stderr, "ratelimit: key '{}' follows timetable '{}' from now on\n", name, text);
    schedules[static_cast<std::size_t>(key - keys.begin())]->follow(std::move(timetable));
  };
  const auto warn = [](const std::string& warning) {
    fmt::print(stderr, "ratelimit: warning: {}\n", warning);
  };
  // -v: as acquire and exec say it.
  const auto say_pause = [&options](const std::string& key, std::chrono::nanoseconds waited) {
    if (options.store.verbose)
      fmt::print(stderr, "ratelimit: key '{}' is backing off: waited {} for its pause\n",
                 format::escaped_bytes(key), format::human_duration(waited));
  };
  pipe::SharedPermitSource source(*store, request_of(keys.front()), io.waiter(), on_followed,
                                  follow_key, warn, say_pause, std::move(more_keys));
  return run(pipe::Engine(engine_options, io, source, draw));
}

// `--stats json` reads "json" as a file: the value of a flag needs "=". Said before the missing
// file is, as a usage error naming what was meant.
void check_flag_values_in_files(const PipeOptions& options) {
  const struct {
    const std::string& given;
    std::string_view flag;
    std::string_view value;
  } kMisplaced[] = {{options.stats, "--stats", "json"},
                    {options.stats, "--stats", "text"},
                    {options.progress, "--progress", "force"},
                    {options.progress, "--progress", "auto"}};
  for (const auto& misplaced : kMisplaced) {
    if (misplaced.given.empty()) continue;
    for (const std::string& file : options.files) {
      if (file == misplaced.value && !std::filesystem::exists(file))
        throw UsageError(fmt::format("no file '{}': to give {} a value, write {}={}", file,
                                     misplaced.flag, misplaced.flag, misplaced.value));
    }
  }
}

// This pipe's live control in the state directory; none, after a warning, when that is not safe.
std::unique_ptr<control::ControlChannel> open_control(const std::string& state_dir,
                                                      const pipe::Unit& unit) {
  std::unique_ptr<control::ControlChannel> control =
      control::ControlChannel::create(state_dir, unit.counts_bytes());
  if (!control)
    fmt::print(stderr,
               "ratelimit: warning: no control FIFO in {} (missing or unsafe): 'ratelimit set {}' "
               "cannot change this pipe's rate\n",
               state_dir, ::getpid());
  return control;
}

// --progress: always with =force, else when standard error is a terminal.
bool shows_progress(const PipeOptions& options) {
  return options.progress == "force" || (options.progress == "auto" && ::isatty(STDERR_FILENO));
}

// With several keys, each of `keys` and how long it held the pipe so far; none with one key.
std::vector<control::KeyHeld> keys_held(const std::vector<PipeKey>& keys,
                                        const pipe::Totals& totals) {
  std::vector<control::KeyHeld> held;
  if (keys.size() < 2) return held;
  for (const PipeKey& key : keys) {
    const auto found = totals.held_by_keys.find(key.options.key);
    held.push_back({.key = key.options.key,
                    .held_seconds = found == totals.held_by_keys.end()
                                        ? 0.0
                                        : std::chrono::duration<double>(found->second).count()});
  }
  return held;
}

// What the engine calls as the data moves: the status for `status` and `set` (when there is a
// control channel) and the progress line (when shown); none when neither.
pipe::Engine::ProgressCallback watch_progress(const PipeOptions& options,
                                              const std::vector<PipeKey>& keys,
                                              const format::Notation& notation,
                                              control::ControlChannel* control,
                                              const pipe::TimetableSchedule& schedule,
                                              pipe::FileIo& io, pipe::ProgressMeter& meter) {
  const bool show_progress = shows_progress(options);
  const auto publish = [control, notation, &key = options.key, &keys, &schedule,
                        &io](const pipe::Totals& totals) {
    control->publish({.notation = notation,
                      .rate = totals.rate,
                      .units = totals.units,
                      .bytes = totals.bytes,
                      .key = key,
                      .timetable = schedule.timetable_text(),
                      .keys = keys_held(keys, totals),
                      .held_by = keys.size() > 1 ? totals.held_by_key : std::string()},
                     io.now());
  };
  if (!show_progress && !control) return {};
  return [publish, control, show_progress, &meter](const pipe::Totals& totals) {
    if (control) publish(totals);
    if (!show_progress) return;
    constexpr int kWidthOffTerminal = 80;  // --progress=force into a file or a pipe
    const int width = io::terminal_width(STDERR_FILENO).value_or(kWidthOffTerminal);
    fmt::print(stderr, "\r{}\033[K", meter.line(totals, width));
    std::fflush(stderr);
  };
}

// What is said on standard error once the data has moved: the end of the progress line, --stats.
void report_end(const PipeOptions& options, const pipe::Result& result,
                const format::Notation& notation, pipe::FileIo& io) {
  if (shows_progress(options)) fmt::print(stderr, "\n");
  const auto moved = [&] {
    return fmt::format(
        "{} {} written, the rest left unread", result.totals.units,
        format::counted_name(notation.counted, static_cast<double>(result.totals.units)));
  };
  // From a second on, in whole seconds rounded up: the turn as set, not the moments since.
  const double wait = std::chrono::duration<double>(result.refused_wait).count();
  const std::string refused_wait =
      format::human_duration(std::chrono::duration<double>(wait >= 1.0 ? std::ceil(wait) : wait));
  // With several keys, the key that refused the turn.
  const std::string& key = result.totals.held_by_key;
  const std::string of_key =
      key.empty() ? std::string() : fmt::format(" of key '{}'", format::escaped_bytes(key));
  if (result.ending == pipe::Ending::wait_too_long)
    fmt::print(stderr,
               "ratelimit: stopped: the next turn{} was {} away, longer than --timeout {}; {}\n",
               of_key, refused_wait, options.timeout->text, moved());
  if (result.ending == pipe::Ending::quota_spent)
    fmt::print(stderr, "ratelimit: stopped: a quota{} is spent for {} more; {}\n", of_key,
               refused_wait, moved());
  // -v: as acquire and exec say it, in all for the run.
  if (options.store.verbose)
    for (const auto& [held_by, waited] : result.totals.held_by_keys)
      fmt::print(stderr, "ratelimit: waited {} for key '{}'\n",
                 format::human_duration(std::chrono::duration<double>(waited)),
                 format::escaped_bytes(held_by));
  if (options.stats == "text") fmt::print(stderr, "{}\n", pipe::summary_text(result, notation));
  if (options.stats == "json") {
    const auto unix_time_at_clock_zero =
        std::chrono::system_clock::now().time_since_epoch() - io.now();
    fmt::print(stderr, "{}\n", pipe::summary_json(result, notation, unix_time_at_clock_zero));
  }
}

// What the inputs hold in the units counted, for the progress line's percentage and ETA.
std::optional<std::uint64_t> total_units(const PipeOptions& options, const pipe::Unit& unit,
                                         const pipe::FileIo& io) {
  if (options.size) {
    if (!unit.counts_bytes() && options.size->value.unit != DataUnit::unspecified)
      throw UsageError(fmt::format(
          "size '{}' is in bytes or bits, but this command counts {}: write it without B/bit",
          options.size->text, format::counted_name(pipe::counted(unit))));
    return static_cast<std::uint64_t>(std::llround(options.size->value.units));
  }
  if (unit.counts_bytes()) return io.total_bytes();
  if (!shows_progress(options)) return std::nullopt;
  return io.count_records(*unit.delimiter, kMostBytesCountedAhead);
}

int run_pipe(const PipeOptions& options) {
  check_flag_values_in_files(options);
  const pipe::Unit unit = unit_of(options);
  // Before the control FIFO: a state directory that cannot keep the key is an error, said alone
  // rather than after a warning that the FIFO cannot be made there either.
  const std::vector<KeyOptions> key_options =
      options.key.empty() ? std::vector<KeyOptions>{} : keys_of_call(options);
  const std::unique_ptr<stores::BucketStore> store =
      options.key.empty() ? nullptr : stores::open_store(options.store.stores);
  std::vector<PipeKey> keys;
  for (const KeyOptions& key : key_options)
    keys.push_back(
        {.options = key,
         .bucket = bucket_or_key(key.bucket, key.key, options.store, *store, pipe::counted(unit))});
  // The first key's bucket is the pipe's: its rate is the one shown, `set` changes it.
  const ParsedBucket bucket =
      keys.empty() ? bucket_of(options.bucket, pipe::counted(unit)) : keys.front().bucket;
  if (options.stop_at_quota && bucket.quotas.empty() && options.key.empty())
    throw UsageError("--stop-at-quota needs a --quota, or a --key whose users give one");
  const io::LocalTimeZone local_time;
  // Always: `ratelimit set` may send a timetable to a pipe started with one rate.
  const auto wall_clock = [] { return std::chrono::system_clock::now(); };
  pipe::TimetableSchedule schedule(bucket.timetable, bucket.params.permits_per_second, local_time,
                                   wall_clock);
  // Each other key follows its own timetable's entries, and one another user sets on it.
  std::deque<pipe::TimetableSchedule> other_schedules;
  std::vector<pipe::TimetableSchedule*> schedules{&schedule};
  double slowest_rate = bucket.params.permits_per_second;
  for (std::size_t i = 1; i < keys.size(); ++i) {
    const ParsedBucket& key_bucket = keys[i].bucket;
    schedules.push_back(&other_schedules.emplace_back(
        key_bucket.timetable, key_bucket.params.permits_per_second, local_time, wall_clock));
    slowest_rate = std::min(slowest_rate, key_bucket.params.permits_per_second);
  }
  const std::unique_ptr<control::ControlChannel> control =
      open_control(options.store.state_dir, unit);
  pipe::FileIo io(options.files, options.output, control.get());
  pipe::EngineOptions engine_options;
  engine_options.unit = unit;
  engine_options.bucket = bucket.params;
  engine_options.quotas = bucket.quotas;
  for (std::size_t i = 1; i < keys.size(); ++i) {
    const std::vector<QuotaParams>& quotas = keys[i].bucket.quotas;
    engine_options.quotas.insert(engine_options.quotas.end(), quotas.begin(), quotas.end());
  }
  engine_options.schedule = &schedule;
  for (pipe::TimetableSchedule& key_schedule : other_schedules)
    engine_options.key_schedules.push_back(&key_schedule);
  engine_options.progress_wakes = shows_progress(options);
  if (options.timeout) engine_options.longest_wait = options.timeout->value;
  engine_options.stop_at_quota = options.stop_at_quota;
  choose_chunk(options, slowest_rate, engine_options, io);
  if (keys.empty()) fit_chunk_to_quotas(options, bucket, engine_options);
  for (const PipeKey& key : keys) fit_chunk_to_quotas(options, key.bucket, engine_options);
  if (!options.key.empty() && engine_options.default_chunk_limit)
    engine_options.writes_per_chunk =
        pipe::shared_writes_per_chunk(engine_options.write_interval());
  pipe::ProgressMeter meter(bucket.notation, total_units(options, unit, io));
  const pipe::Engine::ProgressCallback on_progress =
      watch_progress(options, keys, bucket.notation, control.get(), schedule, io, meter);
  const pipe::Result result =
      run_engine(options, engine_options, store.get(), keys, schedules, io, on_progress);
  report_end(options, result, bucket.notation, io);
  return exit_code(result);
}

}  // namespace

Command setup_pipe(CLI::App& app) {
  auto options = std::make_shared<PipeOptions>();
  add_bucket_options(app, options->bucket, format::Counted::bytes);
  add_key_groups_option(app, *options,
                        "Share the bucket NAME with every pipe, exec and acquire that names it; "
                        "again for several keys, each with the options that follow it");
  add_store_options(app, options->store);
  add_redis_policy_option(app, options->store);
  app.add_option("FILE", options->files, "Files to read in order, as cat does; - is standard input")
      ->option_text("...")
      ->group("Pipe");
  app.add_option("-o,--output", options->output, "Write here instead of standard output")
      ->option_text("FILE")
      ->group("Pipe");
  auto* lines = app.add_flag("-l,--lines", options->lines,
                             "Count lines: the rate is in lines, a line is never split")
                    ->group("Pipe");
  auto* null = app.add_flag("-0,--null", options->null, "Count NUL-terminated records")
                   ->group("Pipe")
                   ->excludes(lines);
  add_read_option(app, "--delimiter", options->delimiter, parse_delimiter, "CHAR",
                  "Count records ended by this character (or \\n, \\t, \\0)")
      ->excludes(lines)
      ->excludes(null)
      ->group("Pipe");
  add_written_option(app, "--chunk", options->chunk, parse_chunk, "SIZE|TIME",
                     "Units per write (64k), or the time between writes (10ms) [default: 108ms for "
                     "bytes, 10ms for records]")
      ->group("Pipe");
  add_written_option(app, "--timeout", options->timeout, parse_duration, "DURATION",
                     "Wait at most this long for a turn (e.g. 30s); a longer wait ends the pipe "
                     "with exit 75, the rest of the input unread")
      ->group("Rate");
  app.add_flag("--stop-at-quota", options->stop_at_quota,
               "End with exit 75, the rest of the input unread, when a quota is spent, instead of "
               "waiting for its window")
      ->group("Rate");
  add_written_option(app, "-s,--size", options->size, parse_size, "SIZE",
                     "What the input holds, for --progress's percentage and ETA on standard input "
                     "(e.g. 4.7G; lines with -l)")
      ->group("Output");
  app.add_flag("-p{auto},--progress{auto}", options->progress,
               "Draw a progress line on standard error when it is a terminal (=force: always)")
      ->transform(one_of({"auto", "force"}))
      ->option_text("[=force]")
      ->group("Output");
  app.add_flag("--stats{text}", options->stats,
               "Print a summary line on standard error at the end (=text, the default; =json: "
               "as JSON)")
      ->transform(one_of({"text", "json"}))
      ->option_text("[=text|json]")
      ->group("Output");
  return Command{&app, [options] { return run_pipe(*options); }};
}

}  // namespace ratelimit::cli
