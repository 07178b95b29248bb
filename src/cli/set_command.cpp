#include <fmt/core.h>
#include <sys/types.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/bucket_options.hpp"
#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/units.hpp"
#include "control/control.hpp"
#include "format/escaping.hpp"
#include "format/quantities.hpp"
#include "format/timetable_text.hpp"

namespace ratelimit::cli {
namespace {

struct SetOptions {
  long pid = 0;     // 0: none given
  std::string key;  // empty: none given
  StoreOptions store;
  KeyChangeOptions change;  // a pipe's: only the rate
};

// How `set --key` shows a key's rates: as its --rate was written, in bytes when it says so (a key
// of pipes in byte mode), else in permits.
format::Notation key_notation(const BucketOptions& options) {
  if (!options.rate) return format::Notation{.counted = format::Counted::permits};
  const RateValue& rate = options.rate->value;
  const bool in_bytes = !rate.timetable && rate.rate.unit != DataUnit::unspecified;
  return notation_of(rate, in_bytes ? format::Counted::bytes : format::Counted::permits);
}

// Whether `options` change more of a key than its rate (or timetable).
bool changes_more_than_rate(const KeyChangeOptions& options) {
  const BucketOptions& bucket = options.bucket;
  return bucket.burst || bucket.warmup || bucket.start_full || bucket.pay_first ||
         options.start_full_off || options.pay_first_off || !bucket.quotas.empty() ||
         !options.removed_quota_periods.empty() || options.all_quotas_removed;
}

// "key 'k' now has rate 7/s, burst 2s, quota 5000/h (was rate 5/s, burst 1s)": every setting, for
// a change of more than the rate or a key made.
int set_key_settings(const SetOptions& options, stores::BucketStore& store,
                     const std::optional<stores::BucketStatus>& key) {
  // A key may count bytes (its pipes') or permits: amounts in bytes are taken as written.
  const KeyChange change = changed_key(options.change, key, format::Counted::bytes);
  const format::Notation notation = key_notation(options.change.bucket);
  stores::set_key_rate_by_hand(store,
                               {.key = options.key,
                                .permits_per_second = change.settings.params.permits_per_second,
                                .schedule = change.schedule,
                                .settings = change.settings});
  fmt::print(stderr, "ratelimit: key '{}' now has {}{}\n", format::escaped_bytes(options.key),
             describe_settings(change.settings, notation),
             key ? fmt::format(" (was {})", describe_settings(settings_of(*key), notation))
                 : std::string(" (a new key)"));
  return exit_ok;
}

// "now at 7/s (was 5/s)": the rate as the user wrote it, the one it replaced alike.
int set_key_rate(const SetOptions& options) {
  const std::unique_ptr<stores::BucketStore> store = stores::open_store(options.store.stores);
  std::vector<stores::BucketStatus> found = store->status(options.key);
  std::optional<stores::BucketStatus> key;
  if (found.size() == 1 && found.front().problem.empty()) key = std::move(found.front());
  if (!key || changes_more_than_rate(options.change)) return set_key_settings(options, *store, key);
  if (!options.change.bucket.rate) throw UsageError("set --key needs --rate or another setting");
  // A key may count bytes (its pipes') or permits: a rate in bytes is taken as written.
  const ParsedBucket bucket = bucket_of(options.change.bucket, format::Counted::bytes);
  const std::optional<std::vector<stores::BucketStatus>> before =
      stores::set_key_rate_by_hand(*store, {.key = options.key,
                                            .permits_per_second = bucket.params.permits_per_second,
                                            .schedule = bucket.key_schedule});
  if (!before) throw no_bucket(options.key, options.store);
  const format::Notation notation = key_notation(options.change.bucket);
  const std::string now_text =
      bucket.timetable
          ? std::string("follows the timetable")
          : "now at " + format::written_rate(bucket.params.permits_per_second, notation);
  std::string was;
  if (!before->empty() && before->front().problem.empty()) {
    const stores::BucketStatus& old = before->front();
    was = old.schedule.timetable.empty()
              ? format::written_rate(old.params.permits_per_second, notation)
              : "a timetable";
  }
  fmt::print(stderr, "ratelimit: key '{}' {}{}\n", format::escaped_bytes(options.key), now_text,
             was.empty() ? "" : fmt::format(" (was {})", was));
  return exit_ok;
}

// How long a pipe is waited for, for its status before and for its answer after: a pipe waiting for
// its reader reads its FIFO only once it can write again.
constexpr std::chrono::seconds kLongestAnswer{1};

// What a running pipe counts, as it says, or as its FIFO's name tells (bytes or records).
format::Counted counted_by(const control::RunningPipe& running,
                           const std::optional<control::PipeStatus>& status) {
  if (status) return status->notation.counted;
  return running.counts_bytes ? format::Counted::bytes : format::Counted::records;
}

// What `set` says, on one line within 80 columns: the rate the pipe answers is in force now, as
// the user wrote it, and the one it had before as its own --rate was written. Without an answer
// in time, only what was sent.
void report_answer(const SetOptions& options, const control::RunningPipe& running,
                   const std::optional<control::PipeStatus>& before, double sent_rate) {
  const std::optional<control::PipeStatus> answer =
      control::await_answer(running, before ? before->answered : 0, kLongestAnswer);
  const format::Counted counted = counted_by(running, answer ? answer : before);
  const Written<RateValue>& rate = *options.change.bucket.rate;
  const format::Notation written = notation_of(rate.value, counted);
  const bool timetable = rate.value.timetable.has_value();
  if (!answer) {
    fmt::print(
        stderr, "ratelimit: sent {} to pipe {}: no answer in {}s (waiting for its reader?)\n",
        timetable ? fmt::format("'{}'", rate.text) : format::rate_with_unit(sent_rate, written),
        options.pid, kLongestAnswer.count());
    return;
  }
  const std::string now_text =
      timetable
          ? fmt::format("follows the timetable: {} now",
                        format::rate_with_unit(answer->rate, answer->notation))
          : "now at " + format::rate_with_unit(
                            answer->rate, answer->rate == sent_rate ? written : answer->notation);
  fmt::print(stderr, "ratelimit: pipe {} {}{}\n", options.pid, now_text,
             before
                 ? fmt::format(" (was {})", format::rate_with_unit(before->rate, before->notation))
                 : "");
}

int run_set(const SetOptions& options) {
  if (!options.key.empty()) return set_key_rate(options);
  if (options.pid == 0) throw UsageError("set needs a PID or --key NAME");
  if (changes_more_than_rate(options.change))
    throw UsageError(
        "a running pipe takes only --rate from set; --burst, --warmup, --start-full, "
        "--pay-first, --quota and their --no- forms change a key (set --key NAME)");
  if (!options.change.bucket.rate) throw UsageError("set PID needs --rate");
  const std::string& state_dir = options.store.state_dir;
  const std::string no_pipe =
      fmt::format("no ratelimit pipe runs as process {} (no pipe-{}.bytes or .records in {})",
                  options.pid, options.pid, state_dir);
  const std::optional<control::RunningPipe> running =
      control::find_running_pipe(state_dir, options.pid);
  if (!running) throw InputError(no_pipe);
  const std::optional<control::PipeStatus> before =
      control::current_status(*running, kLongestAnswer);
  // Checked against what the pipe counts, as its own --rate was.
  ParsedBucket bucket = bucket_of(options.change.bucket, counted_by(*running, before));
  const BucketParams& params = bucket.params;
  std::optional<Timetable>& timetable = bucket.timetable;
  if (!control::send_rate(*running, timetable ? control::NewRate(std::move(*timetable))
                                              : control::NewRate(params.permits_per_second)))
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
  add_bucket_options(*set, options->change.bucket, format::Counted::bytes);
  set->get_option("--rate")->description(
      "The new rate or timetable, in the pipe's units (B or bit only in byte mode)");
  set->add_option("--no-quota", CLI::callback_t{},
                  "With --key: remove the key's quota of this PERIOD (e.g. 1h, 1d), or all of "
                  "them (all)")
      ->check(CLI::Validator(
          [options](std::string& text) -> std::string {
            if (text == "all") {
              options->change.all_quotas_removed = true;
              return {};
            }
            try {
              options->change.removed_quota_periods.push_back(parse_duration(text));
              return {};
            } catch (const UsageError&) {
              return fmt::format("--no-quota '{}' is no period: write e.g. 1h, 1d, or all", text);
            }
          },
          "PERIOD"))
      ->option_text("PERIOD|all")
      ->group("Rate");
  set->add_flag("--no-start-full", options->change.start_full_off,
                "With --key: turn the key's --start-full off")
      ->excludes(set->get_option("--start-full"))
      ->group("Rate");
  set->add_flag("--no-pay-first", options->change.pay_first_off,
                "With --key: turn the key's --pay-first off")
      ->excludes(set->get_option("--pay-first"))
      ->group("Rate");
  set->footer(R"(Examples:
  ratelimit set 4242 --rate 50MiB/s                 a byte pipe: B, bit and prefixes as its --rate
  ratelimit set 4243 --rate 20/s                    a pipe counting lines (-l) or records
  ratelimit set 4242 --rate "08:00,1M 18:00,10M"    a timetable from now on
  ratelimit set --key backup --rate 5MB/s           every user of the key
  ratelimit set --key api --burst 2s --quota 5000/h another setting of the key; the rest stays
  ratelimit set --key api --no-quota 1h             the key's hourly quota removed
  ratelimit set --key api --no-pay-first            --pay-first (or --start-full) off again

'ratelimit status' lists the running pipes and their process ids.)");
  return Command{set, [options] { return run_set(*options); }};
}

}  // namespace ratelimit::cli
