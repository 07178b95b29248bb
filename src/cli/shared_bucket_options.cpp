#include "cli/shared_bucket_options.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <limits>
#include <map>

#include "backends/redis/redis_url.hpp"
#include "backends/state_file/state_file_format.hpp"
#include "cli/help.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "io/waiter.hpp"

namespace ratelimit::cli {
namespace {

// A --redis-timeout: a duration of at least a millisecond.
std::chrono::nanoseconds parse_redis_timeout(std::string_view text) {
  const std::chrono::nanoseconds duration = parse_duration(text);
  if (duration < std::chrono::milliseconds(1))
    throw UsageError("invalid duration '" + std::string(text) + "': must be at least 1ms");
  return duration;
}

std::string describe_params(const BucketParams& params, const std::string& timetable) {
  const std::string rate = timetable.empty() ? fmt::format("rate {:g}/s", params.permits_per_second)
                                             : fmt::format("timetable '{}'", timetable);
  if (params.shape == BucketShape::warming_up)
    return fmt::format("{}, warm-up {:g}s, cold factor {:g}", rate,
                       std::chrono::duration<double>(params.warmup).count(), params.cold_factor);
  return fmt::format("{}, burst {:g}s", rate, params.max_burst_seconds);
}

}  // namespace

CLI::Option* add_key_option(CLI::App& app, std::string& key) {
  return app.add_option("-k,--key", key, "Name of the shared bucket")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            try {
              backends::validate_key(name);
              return {};
            } catch (const std::invalid_argument& error) {
              return error.what();
            }
          },
          "NAME"))
      ->option_text("NAME")
      ->group("Shared bucket");
}

void add_store_options(CLI::App& app, StoreOptions& options) {
  app.add_option("--state-dir", options.state_dir,
                 "Directory of the bucket files [default: $RATELIMIT_STATE_DIR, "
                 "$XDG_RUNTIME_DIR/ratelimit, /tmp/ratelimit-$UID]")
      ->option_text("DIR")
      ->group("Shared bucket");
  app.add_flag("-v,--verbose", options.verbose, "Say why a bucket's record was discarded");
  app.add_option(
         "--redis", options.redis,
         "Keep the buckets in Redis, shared by every host: redis[s]://[[user]:password@]"
         "host[:port][/db] (rediss: TLS) or unix:///path[?db=N] [default: $RATELIMIT_REDIS]")
      ->envname("RATELIMIT_REDIS")
      ->group("Shared bucket");
  app.add_option("--redis-timeout", options.redis_timeout,
                 "Give up on Redis if an operation (connect, TLS, its commands) takes longer")
      ->check(syntax_check(parse_redis_timeout, "DURATION"))
      ->capture_default_str()
      ->group("Shared bucket");
  app.add_option("--redis-tls-ca", options.redis_tls.ca_file,
                 "rediss://: trust the CAs in this PEM file [default: the system's]")
      ->option_text("FILE")
      ->group("Shared bucket");
  auto* cert = app.add_option("--redis-tls-cert", options.redis_tls.cert_file,
                              "rediss://: this client's certificate (PEM), for a server that "
                              "asks for one")
                   ->option_text("FILE")
                   ->group("Shared bucket");
  app.add_option("--redis-tls-key", options.redis_tls.key_file,
                 "The private key of --redis-tls-cert (PEM) [default: in its file]")
      ->option_text("FILE")
      ->needs(cert)
      ->group("Shared bucket");
  app.add_flag("--redis-tls-insecure", options.redis_tls_insecure,
               "rediss://: do not check the server's certificate and name (warns)")
      ->group("Shared bucket");
}

void add_redis_policy_option(CLI::App& app, StoreOptions& options) {
  app.add_option("--on-redis-error", options.on_redis_error,
                 "If Redis cannot answer: fail (exit 69), allow (run unthrottled) or local (use "
                 "this host's bucket of the key)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, backends::OnUnavailable>{{"fail", backends::OnUnavailable::fail},
                                                         {"allow", backends::OnUnavailable::allow},
                                                         {"local", backends::OnUnavailable::local}},
          CLI::ignore_case))
      ->transform(one_of({"fail", "allow", "local"}))
      ->option_text("fail|allow|local")
      ->group("Shared bucket");
}

backends::BackendOptions backend_options(const StoreOptions& options) {
  return {
      .state_dir = options.state_dir,
      .notify =
          [verbose = options.verbose](const std::string& message) {
            if (verbose) fmt::print(stderr, "ratelimit: {}\n", message);
          },
      .redis_url = options.redis,
      .redis_timeout =
          std::chrono::ceil<std::chrono::milliseconds>(parse_redis_timeout(options.redis_timeout)),
      .redis_tls = {.ca_file = options.redis_tls.ca_file,
                    .cert_file = options.redis_tls.cert_file,
                    .key_file = options.redis_tls.key_file,
                    .verify = !options.redis_tls_insecure},
      .on_redis_error = options.on_redis_error,
      .warn = [](const std::string& message) { fmt::print(stderr, "ratelimit: {}\n", message); }};
}

std::unique_ptr<backends::BucketBackend> open_backend(const StoreOptions& options) {
  return backends::open_backend(backend_options(options));
}

std::string state_dir_of(const StoreOptions& options) {
  return backends::state_dir_from_environment(options.state_dir);
}

bool may_hold_buckets(const StoreOptions& options) {
  return !options.redis.empty() || std::filesystem::exists(state_dir_of(options));
}

std::string store_of(const StoreOptions& options) {
  if (!options.redis.empty()) return "Redis at " + backends::hide_password(options.redis);
  return state_dir_of(options);
}

void add_permit_options(CLI::App& app, PermitOptions& options) {
  add_bucket_options(app, options.bucket, RateUnits::plain);
  add_store_options(app, options.store);
  add_redis_policy_option(app, options.store);
  add_key_option(app, options.key);
  app.add_option("--permits", options.permits, "Permits to take [default: 1]")
      ->check(whole_number_in(1, std::numeric_limits<std::int64_t>::max()))
      ->option_text("N")
      ->group("Shared bucket");
  auto* try_only = app.add_flag("--try", options.try_only,
                                "Never wait: exit 75 at once if no permit is free now")
                       ->group("Shared bucket");
  app.add_option("--timeout", options.timeout,
                 "Wait at most this long, else exit 75 without waiting (e.g. 500ms, 10s)")
      ->check(syntax_check(parse_duration, "DURATION"))
      ->option_text("DURATION")
      ->excludes(try_only)
      ->group("Shared bucket");
}

backends::PermitRequest to_permit_request(const PermitOptions& options,
                                          std::chrono::nanoseconds now) {
  backends::PermitRequest request;
  request.key = options.key;
  const auto wall_now = std::chrono::system_clock::now();
  request.params = to_bucket_params(options.bucket, RateUnits::plain, wall_now);
  request.schedule = to_key_schedule(options.bucket, RateUnits::plain, wall_now);
  request.permits = options.permits;
  std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max();
  if (options.try_only) timeout = std::chrono::nanoseconds::zero();
  if (!options.timeout.empty()) timeout = parse_duration(options.timeout);
  if (timeout != std::chrono::nanoseconds::max())
    request.deadline = timeout > std::chrono::nanoseconds::max() - now
                           ? std::chrono::nanoseconds::max()
                           : now + timeout;
  return request;
}

int admit_then(const PermitOptions& options, int max_inflight,
               const std::function<int(exec::Admission&)>& admitted) {
  const std::unique_ptr<backends::BucketBackend> backend = open_backend(options.store);
  std::unique_ptr<backends::InflightSlots> slots;
  if (max_inflight > 0) slots = backends::open_inflight_slots(backend_options(options.store));
  exec::Admission admission;
  exec::AdmissionRequest request;
  {
    io::SignalGuard guard;
    io::SignalWaiter waiter(guard);
    request = {.permits = to_permit_request(options, waiter.now()), .max_inflight = max_inflight};
    admission = exec::admit(*backend, slots.get(), waiter, request);
  }
  if (admission.replaced_params)
    announce_replaced_params(options.key,
                             {*admission.replaced_params, admission.replaced_timetable},
                             {request.permits.params, request.permits.schedule.timetable});
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
                              const KeyParams& now_in_force) {
  fmt::print(stderr, "ratelimit: key '{}' now has {} (was {})\n", key,
             describe_params(now_in_force.params, now_in_force.timetable),
             describe_params(replaced.params, replaced.timetable));
}

}  // namespace ratelimit::cli
