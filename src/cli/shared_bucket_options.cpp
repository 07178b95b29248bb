#include "cli/shared_bucket_options.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <utility>

#include "agent/agent.hpp"
#include "cli/exit_codes.hpp"
#include "cli/units.hpp"
#include "control/control.hpp"
#include "format/escaping.hpp"
#include "format/timetable_text.hpp"
#include "io/local_time_posix.hpp"
#include "io/waiter.hpp"
#include "ratelimit/quota.hpp"
#include "state/key_file_names.hpp"

namespace ratelimit::cli {
namespace {

// Declares on `app` the options the stores declare, read into `options.stores`: those of every
// command, or those of the commands that take permits. A value is read as it is checked, each one
// given, so that every value given is checked and the last one holds.
void add_options_of_stores(CLI::App& app, StoreOptions& options, bool for_permits) {
  for (const stores::StoreOption<stores::StoresOptions>& declared : stores::store_options()) {
    const stores::OptionText& text = declared.text;
    if (text.for_permits != for_permits) continue;
    CLI::Option* option = nullptr;
    if (text.kind == stores::OptionKind::flag) {
      option = app.add_flag_callback(
          std::string(text.name), [&options, &declared] { declared.read(options.stores, {}); },
          std::string(text.help));
    } else {
      const auto read = [&options, &declared](std::string& value) -> std::string {
        try {
          stores::GivenValue given{.text = value};
          if (declared.text.kind == stores::OptionKind::duration)
            given.duration = parse_duration(value);
          declared.read(options.stores, given);
          return {};
        } catch (const UsageError& error) {
          return error.what();
        }
      };
      option = app.add_option(std::string(text.name), CLI::callback_t{}, std::string(text.help))
                   ->check(CLI::Validator(read, std::string(text.value_name)))
                   ->option_text(std::string(text.value_name));
    }
    if (!text.environment.empty()) option->envname(std::string(text.environment));
    if (!text.needs.empty()) option->needs(std::string(text.needs));
    option->group("Shared bucket");
  }
}

// A quota's period as --no-quota takes it: "1h", "1d", "10m", "30s", "500ms".
std::string period_text(std::chrono::nanoseconds period) {
  using namespace std::chrono;
  for (const auto& [unit, suffix] :
       {std::pair{nanoseconds(days(1)), "d"}, std::pair{nanoseconds(hours(1)), "h"},
        std::pair{nanoseconds(minutes(1)), "m"}, std::pair{nanoseconds(seconds(1)), "s"}})
    if (period % unit == nanoseconds::zero()) return fmt::format("{}{}", period / unit, suffix);
  return fmt::format("{}ms", duration_cast<milliseconds>(period).count());
}

// A value on a shell command line: quoted when it holds anything but plain characters.
std::string shell_word(const std::string& text) {
  if (text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                             "./:,_+-") == std::string::npos)
    return text;
  return "'" + text + "'";
}

// The options of `ratelimit set --key` that make the settings `own` (as `written` gives them) the
// key's instead of `key_settings`: " --rate 4/s --quota 3/h"; empty if none can.
std::string set_options_for(const stores::KeySettings& key_settings, const stores::KeySettings& own,
                            const BucketOptions& written) {
  std::string options;
  if (written.rate) {
    const BucketParams& mine = own.params;
    const BucketParams& keys = key_settings.params;
    if (own.timetable != key_settings.timetable ||
        (own.timetable.empty() && mine.permits_per_second != keys.permits_per_second))
      options += " --rate " + shell_word(written.rate->text);
    if (mine.shape == BucketShape::bursty &&
        (keys.shape != BucketShape::bursty || mine.max_burst_seconds != keys.max_burst_seconds))
      options += " --burst " + (written.burst ? shell_word(written.burst->text) : "1s");
    if (mine.shape == BucketShape::warming_up &&
        (keys.shape != BucketShape::warming_up || mine.warmup != keys.warmup ||
         mine.cold_factor != keys.cold_factor))
      options +=
          fmt::format(" --warmup {}ms --cold-factor {:g}",
                      std::chrono::duration_cast<std::chrono::milliseconds>(mine.warmup).count(),
                      mine.cold_factor);
    if (mine.start_full && !keys.start_full) options += " --start-full";
    if (mine.pay_first && !keys.pay_first) options += " --pay-first";
  }
  const auto has = [](const std::vector<QuotaParams>& quotas, const auto& matches) {
    return std::any_of(quotas.begin(), quotas.end(), matches);
  };
  for (std::size_t i = 0; i < own.quotas.size() && i < written.quotas.size(); ++i)
    if (!has(key_settings.quotas, [&](const QuotaParams& quota) { return quota == own.quotas[i]; }))
      options += " --quota " + shell_word(written.quotas[i].text);
  for (const QuotaParams& quota : key_settings.quotas)
    if (!has(own.quotas, [&](const QuotaParams& mine) { return mine.period == quota.period; }))
      options += " --no-quota " + period_text(quota.period);
  return options;
}

}  // namespace

stores::KeySettings settings_of(const stores::BucketStatus& key) {
  stores::KeySettings settings{
      .params = key.params, .timetable = key.schedule.timetable, .quotas = {}};
  for (const stores::QuotaStatus& quota : key.quotas) settings.quotas.push_back(quota.params);
  return settings;
}

std::string describe_settings(const stores::KeySettings& settings,
                              const format::Notation& notation) {
  const BucketParams& params = settings.params;
  const std::string& timetable = settings.timetable;
  const std::vector<QuotaParams>& quotas = settings.quotas;
  const std::string rate = timetable.empty()
                               ? "rate " + format::written_rate(params.permits_per_second, notation)
                               : fmt::format("timetable '{}'", timetable);
  std::string described =
      params.shape == BucketShape::warming_up
          ? fmt::format("{}, warm-up {:g}s, cold factor {:g}", rate,
                        std::chrono::duration<double>(params.warmup).count(), params.cold_factor)
          : fmt::format("{}, burst {}", rate,
                        format::written_burst(params.max_burst_seconds, params.permits_per_second,
                                              notation));
  if (params.start_full) described += ", start-full";
  if (params.pay_first) described += ", pay-first";
  for (const QuotaParams& quota : quotas)
    described += ", quota " + format::written_quota(quota, notation);
  return described;
}

ParsedBucket bucket_or_key(const BucketOptions& options, const std::string& key,
                           const StoreOptions& store_options, stores::BucketStore& store,
                           format::Counted counted) {
  if (options.rate || !options.quotas.empty() || options.burst || options.warmup ||
      options.start_full || options.pay_first)
    return bucket_of(options, counted);
  std::vector<stores::BucketStatus> found = store.status(key);
  if (found.size() != 1 || !found.front().problem.empty())
    throw UsageError(fmt::format(
        "no --rate, and key '{}' has no bucket in {} to follow: give --rate (e.g. --rate 2/s), "
        "or make the key first (ratelimit set --key {} --rate 2/s)",
        format::escaped_bytes(key), stores::describe_store(store_options.stores), shell_word(key)));
  const stores::BucketStatus& status = found.front();
  ParsedBucket followed;
  followed.params = status.params;
  followed.key_schedule = status.schedule;
  if (!status.schedule.timetable.empty())
    followed.timetable = format::parse_timetable_text(status.schedule.timetable);
  if (followed.timetable) {
    // The entry in force here, as a caller that gives the timetable asks for it: the first user
    // past a change moves the key on.
    const TimetablePeriod period = followed.timetable->at(
        std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()),
        io::LocalTimeZone());
    followed.params.permits_per_second = period.permits_per_second;
    followed.key_schedule.entry_until = period.next_change.time_since_epoch().count();
  }
  for (const stores::QuotaStatus& quota : status.quotas) followed.quotas.push_back(quota.params);
  followed.notation =
      format::notation_of_text(status.notation).value_or(format::Notation{.counted = counted});
  return followed;
}

CLI::Option* add_key_option(CLI::App& app, std::string& key) {
  const auto checked_key = [](const std::string& text) {
    state::validate_key(text);
    return text;
  };
  return add_read_option(app, "-k,--key", key, checked_key, "NAME", "Name of the shared bucket")
      ->group("Shared bucket");
}

void add_store_options(CLI::App& app, StoreOptions& options) {
  app.add_option("--state-dir", options.state_dir,
                 "Directory of the bucket files [default: $RATELIMIT_STATE_DIR, "
                 "$XDG_RUNTIME_DIR/ratelimit, /run/user/$UID/ratelimit, ~/.local/state/ratelimit]")
      ->option_text("DIR")
      ->group("Shared bucket");
  app.final_callback([&options] {
    options.state_dir = state::state_dir_from_environment(options.state_dir);
    stores::StoresOptions& chosen = options.stores;
    stores::check_store_options(chosen);
    chosen.local.directory = options.state_dir;
    chosen.redis.settings.tls.session_dir = options.state_dir;
    if (stores::names_shared_store(chosen) && !options.no_agent)
      chosen.redis.agent = std::make_shared<agent::AgentClient>(options.state_dir);
    chosen.notify = [verbose = options.verbose](const std::string& message) {
      if (verbose) fmt::print(stderr, "ratelimit: {}\n", message);
    };
    chosen.warn = [](const std::string& message) {
      fmt::print(stderr, "ratelimit: {}\n", message);
    };
  });
  app.add_flag("-v,--verbose", options.verbose,
               "Say why a bucket's record was discarded, which Redis node answered, and "
               "whether a TLS session was resumed; twice (-vv), also when acquire's permits were "
               "granted");
  add_options_of_stores(app, options, false);
}

void add_redis_policy_option(CLI::App& app, StoreOptions& options) {
  add_options_of_stores(app, options, true);
  options.no_agent = false;
  app.add_flag("--no-agent", options.no_agent,
               "Connect to Redis from this process, not through this host's ratelimit agent "
               "[default: through it unless $RATELIMIT_NO_AGENT]")
      ->envname("RATELIMIT_NO_AGENT")
      ->group("Shared bucket");
}

InputError no_bucket(const std::string& key, const StoreOptions& options) {
  return InputError(fmt::format("no bucket '{}' in {}", format::escaped_bytes(key),
                                stores::describe_store(options.stores)));
}

bool may_hold_buckets(const StoreOptions& options) {
  return stores::names_shared_store(options.stores) || std::filesystem::exists(options.state_dir);
}

namespace {

bool any_given(const BucketOptions& bucket) {
  return bucket.rate || bucket.burst || bucket.warmup ||
         bucket.cold_factor != BucketOptions{}.cold_factor || bucket.start_full ||
         bucket.pay_first || !bucket.quotas.empty();
}

// A --key read: the first is the call's key, each later one starts a group of its own, and the
// bucket options read until then belong to the key before it.
void start_key(KeyGroups& options, const std::string& key) {
  if (options.key.empty()) {
    options.key = key;
    options.bucket_options_before_key = any_given(options.bucket);
    return;
  }
  if (options.more_keys.empty())
    options.first_key_bucket = std::move(options.bucket);
  else
    options.more_keys.back().bucket = std::move(options.bucket);
  options.bucket = {};
  options.more_keys.push_back({.key = key, .bucket = {}});
}

}  // namespace

std::vector<KeyOptions> keys_of_call(const KeyGroups& options) {
  if (options.more_keys.empty()) return {{.key = options.key, .bucket = options.bucket}};
  if (options.bucket_options_before_key)
    throw UsageError(
        "with several --key, give each key's --rate, --burst, --quota... after its --key, not "
        "before the first");
  std::vector<KeyOptions> keys{{.key = options.key, .bucket = options.first_key_bucket}};
  keys.insert(keys.end(), options.more_keys.begin(), options.more_keys.end());
  keys.back().bucket = options.bucket;
  if (keys.size() > stores::kMaxKeysPerCall)
    throw UsageError(
        fmt::format("too many --key: {} given, at most {}", keys.size(), stores::kMaxKeysPerCall));
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (keys[i].key == keys[j].key)
        throw UsageError(fmt::format("--key '{}' is given twice: name each key once",
                                     format::escaped_bytes(keys[i].key)));
  return keys;
}

void add_key_groups_option(CLI::App& app, KeyGroups& groups, const std::string& description) {
  app.add_option("-k,--key", CLI::callback_t{}, description)
      ->check(CLI::Validator(
          [&groups](std::string& key) -> std::string {
            try {
              state::validate_key(key);
            } catch (const UsageError& error) {
              return error.what();
            }
            start_key(groups, key);
            return {};
          },
          "NAME"))
      ->option_text("NAME")
      ->group("Shared bucket")
      ->trigger_on_parse();
  // Read in the order given, so that each key's options are those that follow it.
  for (const char* name :
       {"--rate", "--warmup", "--burst", "--cold-factor", "--start-full", "--pay-first", "--quota"})
    app.get_option(name)->trigger_on_parse();
}

void add_permit_options(CLI::App& app, PermitOptions& options) {
  add_bucket_options(app, options.bucket, format::Counted::permits);
  add_store_options(app, options.store);
  add_redis_policy_option(app, options.store);
  add_key_groups_option(app, options, "Name of the shared bucket");
  app.add_option("--permits", options.permits, "Permits to take [default: 1]")
      ->check(whole_number_in(1, kLargestExactCount))
      ->option_text("N")
      ->group("Shared bucket");
  auto* try_only = app.add_flag("--try", options.try_only,
                                "Never wait: exit 75 at once if no permit is free now")
                       ->group("Shared bucket");
  add_read_option(app, "--timeout", options.timeout, parse_duration, "DURATION",
                  "Wait at most this long, else exit 75 without waiting (e.g. 500ms, 10s)")
      ->excludes(try_only)
      ->group("Shared bucket");
}

CLI::App* add_permit_subcommand(CLI::App& app, const std::string& name,
                                const std::string& then_what, PermitOptions& options,
                                const std::string& key_default) {
  CLI::App* command = app.add_subcommand(
      name,
      "Take permits from a bucket shared by every process of a shell loop, then " + then_what);
  add_permit_options(*command, options);
  command->get_option("--key")->description(
      "Name of the shared bucket " + key_default +
      "; repeated, several keys at once (all or nothing), each with the --rate, --burst, "
      "--quota... that follow it");
  return command;
}

stores::PermitRequest to_permit_request(const PermitOptions& options, const ParsedBucket& bucket,
                                        std::chrono::nanoseconds now) {
  stores::PermitRequest request;
  request.key = options.key;
  request.params = bucket.params;
  // The key owns its settings: these make a new key, and follow the key's otherwise.
  request.apply_params = false;
  request.schedule = bucket.key_schedule;
  request.permits = options.permits;
  for (std::size_t i = 0; i < bucket.quotas.size(); ++i)
    if (options.permits > bucket.quotas[i].limit)
      throw UsageError(fmt::format("--permits {} is more than quota '{}' ever allows",
                                   options.permits, options.bucket.quotas[i].text));
  request.quotas = bucket.quotas;
  request.notation = format::notation_text(bucket.notation);
  std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max();
  if (options.try_only) timeout = std::chrono::nanoseconds::zero();
  if (options.timeout) timeout = *options.timeout;
  if (timeout != std::chrono::nanoseconds::max())
    request.deadline = timeout > std::chrono::nanoseconds::max() - now
                           ? std::chrono::nanoseconds::max()
                           : now + timeout;
  return request;
}

namespace {

// Shows a call's wait for a slot, its turn or a pause as a status record in the state directory.
exec::ShowWait status_record_of_call(std::string_view command, const std::string& state_dir) {
  return [command = std::string(command), state_dir](const exec::KeysWait& wait) {
    control::CallStatus status{
        .command = command, .waits_for = wait.what, .held_by = wait.held_by, .until = wait.until};
    for (std::size_t i = 0; i < wait.keys.size(); ++i)
      status.keys.push_back(
          {.key = wait.keys[i],
           .held_seconds =
               i < wait.waits.size() ? std::chrono::duration<double>(wait.waits[i]).count() : 0.0});
    return std::shared_ptr<void>(control::WaitingCallRecord::create(state_dir, status));
  };
}

}  // namespace

int admit_then(std::string_view command, const PermitOptions& options, int max_inflight,
               const std::function<int(exec::Admission&)>& admitted) {
  const std::unique_ptr<stores::BucketStore> store = stores::open_store(options.store.stores);
  std::unique_ptr<exec::InflightSlots> slots;
  if (max_inflight > 0)
    slots = std::make_unique<exec::StateDirectorySlots>(
        state::StateDirectory::open(options.store.state_dir));
  const std::vector<KeyOptions> keys = keys_of_call(options);
  std::vector<PermitOptions> key_options;
  std::vector<ParsedBucket> buckets;
  for (const KeyOptions& key : keys) {
    PermitOptions& own = key_options.emplace_back(options);
    own.key = key.key;
    own.bucket = key.bucket;
    buckets.push_back(
        bucket_or_key(key.bucket, key.key, options.store, *store, format::Counted::permits));
  }
  exec::Admission admission;
  exec::AdmissionRequest request;
  {
    io::SignalGuard guard;
    io::SignalWaiter waiter(guard);
    const std::chrono::nanoseconds now = waiter.now();
    request = {.permits = to_permit_request(key_options.front(), buckets.front(), now),
               .more_keys = {},
               .max_inflight = max_inflight,
               .show_wait = status_record_of_call(command, options.store.state_dir)};
    for (std::size_t i = 1; i < keys.size(); ++i)
      request.more_keys.push_back(to_permit_request(key_options[i], buckets[i], now));
    admission = exec::admit(*store, slots.get(), waiter, request);
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::optional<stores::KeySettings>& followed =
        i == 0 ? admission.followed
               : (i - 1 < admission.more_followed.size() ? admission.more_followed[i - 1]
                                                         : std::nullopt);
    const stores::PermitRequest& asked = i == 0 ? request.permits : request.more_keys[i - 1];
    if (followed)
      announce_followed(
          keys[i].key, *followed,
          {.params = asked.params, .timetable = asked.schedule.timetable, .quotas = asked.quotas},
          keys[i].bucket, buckets[i].notation);
  }
  if (options.store.verbose && !admission.held_by.empty()) {
    const std::string waited =
        format::human_duration(std::chrono::duration<double>(admission.wait));
    if (admission.result == exec::AdmissionResult::refused)
      fmt::print(stderr, "ratelimit: key '{}' refused the call: its permits were {} away\n",
                 format::escaped_bytes(admission.held_by), waited);
    else
      fmt::print(stderr, "ratelimit: waited {} for key '{}'\n", waited,
                 format::escaped_bytes(admission.held_by));
  }
  switch (admission.result) {
    case exec::AdmissionResult::admitted:
      if (options.store.verbose && admission.paused_for > std::chrono::nanoseconds::zero())
        fmt::print(
            stderr, "ratelimit: key '{}' is backing off: waited {} for its pause\n",
            format::escaped_bytes(admission.held_by.empty() ? options.key : admission.held_by),
            format::human_duration(admission.paused_for));
      return admitted(admission);
    case exec::AdmissionResult::interrupted:
      return 128 + admission.signal;
    case exec::AdmissionResult::refused:
      break;
  }
  return exit_temp_failure;
}

void announce_followed(const std::string& key, const stores::KeySettings& key_settings,
                       const stores::KeySettings& own, const BucketOptions& written,
                       const format::Notation& notation) {
  const std::string options = set_options_for(key_settings, own, written);
  fmt::print(stderr, "ratelimit: key '{}' has {}: this call follows it, not its own {} ({})\n",
             format::escaped_bytes(key), describe_settings(key_settings, notation),
             describe_settings(own, notation),
             options.empty()
                 ? fmt::format("to make them the key's: ratelimit reset --key {}, then run again",
                               shell_word(key))
                 : fmt::format("to make them the key's: ratelimit set --key {}{}", shell_word(key),
                               options));
}

}  // namespace ratelimit::cli
