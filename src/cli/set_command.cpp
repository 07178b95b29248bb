#include <fmt/core.h>
#include <sys/types.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "cli/bucket_options.hpp"
#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/units.hpp"
#include "control/control.hpp"
#include "exit_codes.hpp"
#include "format/quantities.hpp"
#include "schedule/timetable_text.hpp"

namespace ratelimit::cli {
namespace {

struct SetOptions {
  long pid = 0;     // 0: none given
  std::string key;  // empty: none given
  StoreOptions store;
  BucketOptions bucket;  // only the rate
};

int set_key_rate(const SetOptions& options) {
  // A key may count bytes (its pipes') or permits: a rate in bytes is taken as written.
  const ParsedBucket bucket = parse_bucket_options(options.bucket, RateUnits::data);
  if (!backends::set_key_rate_by_hand(*open_backend(options.store), options.key,
                                      bucket.params.permits_per_second, bucket.key_schedule)) {
    fmt::print(stderr, "ratelimit: no bucket '{}' in {}\n", options.key, store_of(options.store));
    return exit_no_input;
  }
  return exit_ok;
}

// How long a pipe is waited for, for its status before and for its answer after: a pipe waiting for
// its reader reads its FIFO only once it can write again.
constexpr std::chrono::seconds kLongestAnswer{1};

// What `set` says: the rate the pipe had and the one it answers is in force now, each also in
// units per second. Without an answer in time, only what was sent.
void report_answer(const SetOptions& options, const pipe::RunningPipe& running,
                   const std::optional<pipe::PipeStatus>& before, double sent_rate) {
  const std::optional<pipe::PipeStatus> answer =
      pipe::await_answer(running, before ? before->answered : 0, kLongestAnswer);
  // What the pipe says it counts ("lines" for -l; its FIFO tells bytes from records only) and
  // how its --rate was written.
  const std::optional<pipe::PipeStatus>& said = answer ? answer : before;
  const format::Notation notation =
      said ? said->notation
           : format::Notation{.counted = running.counts_bytes ? format::Counted::bytes
                                                              : format::Counted::records};
  const std::string_view unit = format::counted_name(notation.counted);
  const auto per_second = [&](double rate) {
    return std::isinf(rate) ? std::string("off") : fmt::format("{} {}/s", rate, unit);
  };
  // "10MiB/s (10485760 bytes/s)": as written if given, else as the pipe's --rate was.
  const auto rate_text = [&](double rate, const std::string& written) {
    if (std::isinf(rate)) return std::string("off");
    return fmt::format("{} ({})", written.empty() ? format::written_rate(rate, notation) : written,
                       per_second(rate));
  };
  const bool timetable = schedule::is_timetable(options.bucket.rate);
  if (!answer) {
    fmt::print(stderr,
               "ratelimit: process {}: sent rate {}; no answer within {}s (a pipe waiting for its "
               "reader reads it once it can write)\n",
               options.pid, rate_text(sent_rate, options.bucket.rate), kLongestAnswer.count());
    return;
  }
  // As written when the pipe took it as sent; a timetable's entry in force as the pipe says.
  const std::string now_text =
      timetable
          ? fmt::format("timetable '{}' ({} now)", options.bucket.rate, per_second(answer->rate))
          : rate_text(answer->rate, answer->rate == sent_rate ? options.bucket.rate : "");
  if (!before) {
    // A pipe that did not answer in time before.
    fmt::print(stderr, "ratelimit: process {}: rate set to {}\n", options.pid, now_text);
    return;
  }
  fmt::print(stderr, "ratelimit: process {}: rate set from {} to {}\n", options.pid,
             rate_text(before->rate, ""), now_text);
}

int run_set(const SetOptions& options) {
  if (!options.key.empty()) return set_key_rate(options);
  if (options.pid == 0) throw UsageError("set needs a PID or --key NAME");
  const std::string& state_dir = options.store.state_dir;
  const std::string no_pipe =
      fmt::format("no ratelimit pipe runs as process {} (no pipe-{}.bytes or .records in {})",
                  options.pid, options.pid, state_dir);
  const std::optional<pipe::RunningPipe> running = pipe::find_running_pipe(state_dir, options.pid);
  if (!running) throw InputError(no_pipe);
  // Checked against what the pipe counts, as its own --rate was.
  const RateUnits units = running->counts_bytes ? RateUnits::data : RateUnits::plain;
  ParsedBucket bucket = parse_bucket_options(options.bucket, units);
  const BucketParams& params = bucket.params;
  std::optional<Timetable>& timetable = bucket.timetable;
  const std::optional<pipe::PipeStatus> before = pipe::current_status(*running, kLongestAnswer);
  if (!pipe::send_rate(*running, timetable ? pipe::NewRate(std::move(*timetable))
                                           : pipe::NewRate(params.permits_per_second)))
    throw InputError(no_pipe);
  report_answer(options, *running, before, params.permits_per_second);
  return exit_ok;
}

}  // namespace

Command setup_set(CLI::App& app) {
  auto options = std::make_shared<SetOptions>();
  CLI::App* set = app.add_subcommand(
      "set",
      "Change the rate of a running ratelimit pipe, or of a shared bucket for all its users");
  auto* pid = set->add_option("PID", options->pid, "Process id of the running pipe")
                  ->check(whole_number_in(1, std::numeric_limits<pid_t>::max()));
  add_key_option(*set, options->key)
      ->description("The shared bucket NAME instead, for every pipe, exec and acquire using it")
      ->excludes(pid);
  add_store_options(*set, options->store);
  set->add_option("-r,--rate", options->bucket.rate,
                  "The new rate or timetable, in the pipe's units (B or bit only in byte mode)")
      ->required()
      ->check(syntax_check(check_rate_syntax, "RATE"))
      ->option_text("RATE");
  set->footer(R"(Examples:
  ratelimit set 4242 --rate 50MiB/s                 a byte pipe: B, bit and prefixes as its --rate
  ratelimit set 4243 --rate 20/s                    a pipe counting lines (-l) or records
  ratelimit set 4242 --rate "08:00,1M 18:00,10M"    a timetable from now on
  ratelimit set --key backup --rate 5MB/s           every user of the key

'ratelimit status' lists the running pipes and their process ids.)");
  return Command{set, [options] { return run_set(*options); }};
}

}  // namespace ratelimit::cli
