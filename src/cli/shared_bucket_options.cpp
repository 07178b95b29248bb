#include "cli/shared_bucket_options.hpp"

#include <fmt/core.h>

#include <limits>
#include <map>

#include "backends/redis_backend.hpp"
#include "backends/redis_url.hpp"
#include "backends/state_file_format.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "ratelimit/clock.hpp"

namespace ratelimit::cli {
namespace {

// A --redis-timeout: a duration above zero.
std::chrono::nanoseconds parse_positive_duration(std::string_view text) {
  const std::chrono::nanoseconds duration = parse_duration(text);
  if (duration < std::chrono::milliseconds(1))
    throw UsageError("invalid duration '" + std::string(text) + "': must be at least 1ms");
  return duration;
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
      ->capture_default_str()
      ->group("Shared bucket");
}

void add_store_options(CLI::App& app, StoreOptions& options) {
  app.add_option("--state-dir", options.state_dir,
                 "Directory of the bucket files [default: $RATELIMIT_STATE_DIR, "
                 "$XDG_RUNTIME_DIR/ratelimit, /tmp/ratelimit-$UID]")
      ->group("Shared bucket");
  app.add_flag("-v,--verbose", options.verbose, "Say why a bucket's record was discarded");
  app.add_option("--redis", options.redis,
                 "Keep the buckets in Redis, shared by every host: redis://[[user]:password@]"
                 "host[:port][/db] or unix:///path[?db=N] [default: $RATELIMIT_REDIS]")
      ->envname("RATELIMIT_REDIS")
      ->group("Shared bucket");
  app.add_option("--redis-timeout", options.redis_timeout,
                 "Give up on Redis if it does not connect or answer within this long")
      ->check(syntax_check(parse_positive_duration, "DURATION"))
      ->capture_default_str()
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
      ->option_text("fail|allow|local")
      ->group("Shared bucket");
}

backends::StateFileBackend open_backend(const StoreOptions& options) {
  auto notify = [verbose = options.verbose](const std::string& message) {
    if (verbose) fmt::print(stderr, "ratelimit: {}\n", message);
  };
  return backends::StateFileBackend(
      backends::StateDirectory::open(backends::state_dir_from_environment(options.state_dir)),
      system_clock(), backends::read_boot_id(), notify);
}

SharedBuckets::SharedBuckets(const StoreOptions& options)
    : local_(open_backend(options)), where_(local_.directory().path()) {
  if (options.redis.empty()) return;
  const backends::RedisAddress address = backends::parse_redis_url(options.redis);
  where_ = "Redis at " + address.shown;
  const auto timeout =
      std::chrono::ceil<std::chrono::milliseconds>(parse_positive_duration(options.redis_timeout));
  auto notify = [verbose = options.verbose](const std::string& message) {
    if (verbose) fmt::print(stderr, "ratelimit: {}\n", message);
  };
  auto warn = [](const std::string& message) { fmt::print(stderr, "ratelimit: {}\n", message); };
  redis_ = std::make_unique<backends::FallbackBackend>(
      std::make_unique<backends::RedisBackend>(address, timeout, notify), options.on_redis_error,
      local_, warn);
}

void add_permit_options(CLI::App& app, PermitOptions& options) {
  add_bucket_options(app, options.bucket);
  add_store_options(app, options.store);
  add_redis_policy_option(app, options.store);
  add_key_option(app, options.key);
  app.add_option("--permits", options.permits, "Permits to take")
      ->check(whole_number_in(1, std::numeric_limits<std::int64_t>::max()))
      ->capture_default_str()
      ->group("Shared bucket");
  auto* try_only = app.add_flag("--try", options.try_only,
                                "Never wait: exit 75 at once if no permit is free now")
                       ->group("Shared bucket");
  app.add_option("--timeout", options.timeout,
                 "Wait at most this long, else exit 75 without waiting (e.g. 500ms, 10s)")
      ->check(syntax_check(parse_duration, "DURATION"))
      ->excludes(try_only)
      ->group("Shared bucket");
}

backends::PermitRequest to_permit_request(const PermitOptions& options) {
  backends::PermitRequest request;
  request.key = options.key;
  request.params = to_bucket_params(options.bucket, RateUnits::plain);
  request.permits = options.permits;
  if (options.try_only) request.timeout = std::chrono::nanoseconds::zero();
  if (!options.timeout.empty()) request.timeout = parse_duration(options.timeout);
  return request;
}

int exit_status_of_refusal(const exec::Admission& admission) {
  return admission.result == exec::AdmissionResult::interrupted ? 128 + admission.signal
                                                                : exit_temp_failure;
}

}  // namespace ratelimit::cli
