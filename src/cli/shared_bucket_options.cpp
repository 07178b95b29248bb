#include "cli/shared_bucket_options.hpp"

#include <fmt/core.h>

#include <filesystem>

#include "agent/agent.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "format/escaping.hpp"
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

std::string describe_params(const BucketParams& params, const std::string& timetable,
                            const std::vector<QuotaParams>& quotas,
                            const format::Notation& notation) {
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
  for (const QuotaParams& quota : quotas)
    described += ", quota " + format::written_quota(quota, notation);
  return described;
}

}  // namespace

CLI::Option* add_key_option(CLI::App& app, std::string& key) {
  const auto checked_key = [](const std::string& text) {
    state::validate_key(text);
    return text;
  };
  return app.add_option("-k,--key", CLI::callback_t{}, "Name of the shared bucket")
      ->check(read_into(key, checked_key, "NAME"))
      ->option_text("NAME")
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
    chosen.redis.tls.session_dir = options.state_dir;
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

void add_permit_options(CLI::App& app, PermitOptions& options) {
  add_bucket_options(app, options.bucket, format::Counted::permits);
  add_store_options(app, options.store);
  add_redis_policy_option(app, options.store);
  add_key_option(app, options.key);
  app.add_option("--permits", options.permits, "Permits to take [default: 1]")
      ->check(whole_number_in(1, kLargestExactCount))
      ->option_text("N")
      ->group("Shared bucket");
  auto* try_only = app.add_flag("--try", options.try_only,
                                "Never wait: exit 75 at once if no permit is free now")
                       ->group("Shared bucket");
  app.add_option("--timeout", CLI::callback_t{},
                 "Wait at most this long, else exit 75 without waiting (e.g. 500ms, 10s)")
      ->check(read_into(options.timeout, parse_duration, "DURATION"))
      ->option_text("DURATION")
      ->excludes(try_only)
      ->group("Shared bucket");
}

stores::PermitRequest to_permit_request(const PermitOptions& options, const ParsedBucket& bucket,
                                        std::chrono::nanoseconds now) {
  stores::PermitRequest request;
  request.key = options.key;
  request.params = bucket.params;
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

int admit_then(const PermitOptions& options, int max_inflight,
               const std::function<int(exec::Admission&)>& admitted) {
  const std::unique_ptr<stores::BucketStore> store = stores::open_store(options.store.stores);
  std::unique_ptr<exec::InflightSlots> slots;
  if (max_inflight > 0)
    slots = std::make_unique<exec::StateDirectorySlots>(
        state::StateDirectory::open(options.store.state_dir));
  const ParsedBucket bucket = bucket_of(options.bucket, format::Counted::permits);
  exec::Admission admission;
  exec::AdmissionRequest request;
  {
    io::SignalGuard guard;
    io::SignalWaiter waiter(guard);
    request = {.permits = to_permit_request(options, bucket, waiter.now()),
               .max_inflight = max_inflight};
    admission = exec::admit(*store, slots.get(), waiter, request);
  }
  if (admission.replaced_params)
    announce_replaced_params(
        options.key,
        {*admission.replaced_params, admission.replaced_timetable, admission.replaced_quotas},
        {request.permits.params, request.permits.schedule.timetable, request.permits.quotas},
        bucket.notation);
  switch (admission.result) {
    case exec::AdmissionResult::admitted:
      return admitted(admission);
    case exec::AdmissionResult::interrupted:
      return 128 + admission.signal;
    case exec::AdmissionResult::refused:
      break;
  }
  return exit_temp_failure;
}

void announce_replaced_params(const std::string& key, const KeyParams& replaced,
                              const KeyParams& now_in_force, const format::Notation& notation) {
  fmt::print(
      stderr, "ratelimit: key '{}' now has {} (was {})\n", key,
      describe_params(now_in_force.params, now_in_force.timetable, now_in_force.quotas, notation),
      describe_params(replaced.params, replaced.timetable, replaced.quotas, notation));
}

}  // namespace ratelimit::cli
