#include <fmt/core.h>
#include <sys/types.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <system_error>

#include "cli/bucket_options.hpp"
#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/units.hpp"
#include "control/control.hpp"
#include "exit_codes.hpp"
#include "format/quantities.hpp"
#include "schedule/timetable_text.hpp"
#include "state/state_directory.hpp"

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
  const auto now = std::chrono::system_clock::now();
  const BucketParams params = to_bucket_params(options.bucket, RateUnits::data, now);
  const backends::KeySchedule schedule = to_key_schedule(options.bucket, RateUnits::data, now);
  if (!open_backend(options.store)->set_rate(options.key, params.permits_per_second, schedule)) {
    fmt::print(stderr, "ratelimit: no bucket '{}' in {}\n", options.key, store_of(options.store));
    return exit_no_input;
  }
  return exit_ok;
}

int run_set(const SetOptions& options) {
  if (!options.key.empty()) return set_key_rate(options);
  if (options.pid == 0) throw UsageError("set needs a PID or --key NAME");
  const std::string no_pipe =
      fmt::format("no ratelimit pipe runs as process {} (no pipe-{}.bytes or .records in {})",
                  options.pid, options.pid, backends::state_dir_from_environment(""));
  const std::optional<pipe::RunningPipe> running = pipe::find_running_pipe(options.pid);
  if (!running) throw UsageError(no_pipe);
  // Checked against what the pipe counts, as its own --rate was.
  const RateUnits units = running->counts_bytes ? RateUnits::data : RateUnits::plain;
  const BucketParams params = to_bucket_params(options.bucket, units);
  std::optional<Timetable> timetable = to_timetable(options.bucket, units);
  const std::optional<pipe::PipeStatus> before = pipe::read_status(*running);
  try {
    pipe::send_rate(*running, timetable ? pipe::NewRate(std::move(*timetable))
                                        : pipe::NewRate(params.permits_per_second));
  } catch (const std::system_error& error) {
    // The FIFO of a process killed before it could remove it.
    if (error.code() == std::errc::no_such_device_or_address) throw UsageError(no_pipe);
    throw;
  }
  // What the pipe says it counts ("lines" for -l); the FIFO tells bytes from records only.
  const std::string_view unit = before ? format::counted_name(before->notation.counted)
                                : running->counts_bytes ? "bytes"
                                                        : "records";
  const std::string new_rate =
      timetable ? fmt::format("timetable '{}' ({} {}/s now)", options.bucket.rate,
                              params.permits_per_second, unit)
                : fmt::format("{} ({} {}/s)", options.bucket.rate, params.permits_per_second, unit);
  if (!before) {
    // A pipe that has only just started has not published its rate yet.
    fmt::print(stderr, "ratelimit: process {}: rate set to {}\n", options.pid, new_rate);
    return exit_ok;
  }
  // As the pipe's --rate was written.
  const std::string old_rate =
      std::isinf(before->rate)
          ? "off"
          : fmt::format("{} ({} {}/s)", format::written_rate(before->rate, before->notation),
                        before->rate, unit);
  fmt::print(stderr, "ratelimit: process {}: rate set from {} to {}\n", options.pid, old_rate,
             new_rate);
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
