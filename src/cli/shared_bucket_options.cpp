#include "cli/shared_bucket_options.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <limits>

#include "cli/help.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "io/waiter.hpp"
#include "state/key_file_names.hpp"

namespace ratelimit::cli {
namespace {

// A --redis-timeout: a duration of at least a millisecond.
std::chrono::nanoseconds parse_redis_timeout(std::string_view text) {
  const std::chrono::nanoseconds duration = parse_duration(text);
  if (duration < std::chrono::milliseconds(1))
    throw UsageError("invalid duration '" + std::string(text) + "': must be at least 1ms");
  return duration;
}

// --on-redis-error's words, and the prefix of local's share.
constexpr std::pair<std::string_view, backends::OnUnavailable> kPolicies[] = {
    {"fail", backends::OnUnavailable::fail},
    {"allow", backends::OnUnavailable::allow},
    {"local", backends::OnUnavailable::local}};
constexpr std::string_view kLocalShare = "local:";

std::string lower_case(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

// The policy's words as one_of() checks them (a typo gets its hint), and local:N%.
CLI::Validator redis_error_policy() {
  const CLI::Validator words = one_of({"fail", "allow", "local"});
  return CLI::Validator(
      [words](std::string& text) -> std::string {
        if (!lower_case(text).starts_with(kLocalShare)) return words(text);
        try {
          parse_redis_error_policy(text);
          text = lower_case(text);
          return {};
        } catch (const UsageError& error) {
          return error.what();
        }
      },
      "fail|allow|local[:N%]");
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
    described += fmt::format(", quota {}/{}", quota.limit, format::human_duration(quota.period));
  return described;
}

}  // namespace

backends::UnavailablePolicy parse_redis_error_policy(std::string_view text) {
  const std::string word = lower_case(text);
  const std::string said_as = "--on-redis-error=" + word;
  if (word.starts_with(kLocalShare)) {
    const std::string_view percent = std::string_view(word).substr(kLocalShare.size());
    double share = 0.0;
    const auto [end, error] =
        std::from_chars(percent.data(), percent.data() + percent.size(), share);
    if (error != std::errc() || std::string_view(end) != "%" || !(share > 0.0) || share > 100.0)
      throw UsageError(
          fmt::format("invalid value '{}': expected local:N% with N above 0 and at "
                      "most 100 (this host's share of the key's rate), e.g. local:25%",
                      text));
    return {
        .action = backends::OnUnavailable::local, .local_share = share / 100.0, .said_as = said_as};
  }
  for (const auto& [name, action] : kPolicies) {
    if (word == name) return {.action = action, .local_share = 1.0, .said_as = said_as};
  }
  throw UsageError(
      fmt::format("invalid value '{}': expected fail, allow, local or local:N%", text));
}

CLI::Option* add_key_option(CLI::App& app, std::string& key) {
  return app.add_option("-k,--key", key, "Name of the shared bucket")
      ->check(syntax_check(backends::validate_key, "NAME"))
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
    options.state_dir = backends::state_dir_from_environment(options.state_dir);
    // Without Redis they would be ignored: a typo'd or forgotten --redis would go unnoticed.
    const backends::RedisTlsOptions& tls = options.redis_tls;
    if (options.redis.empty() && (!tls.ca_file.empty() || !tls.cert_file.empty() ||
                                  !tls.key_file.empty() || options.redis_tls_insecure))
      throw UsageError(
          "the --redis-tls-* options need a rediss:// URL (--redis or $RATELIMIT_REDIS)");
  });
  app.add_flag("-v,--verbose", options.verbose,
               "Say why a bucket's record was discarded, and which Redis node answered; "
               "twice (-vv), also when acquire's permits were granted");
  app.add_option("--redis", options.redis,
                 "Keep the buckets in Redis, shared by every host: redis[s]://[[user]:password@]"
                 "host[:port][/db] (rediss: TLS; a server or a Cluster node), unix:///path[?db=N], "
                 "or redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/MASTER[/db] "
                 "[default: $RATELIMIT_REDIS]")
      ->envname("RATELIMIT_REDIS")
      ->option_text("URL")
      ->group("Shared bucket");
  app.add_option("--redis-timeout", options.redis_timeout,
                 "Give up on Redis if an operation (connect, TLS, its commands) takes longer "
                 "[default: 1s]")
      ->check(syntax_check(parse_redis_timeout, "DURATION"))
      ->option_text("DURATION")
      ->group("Shared bucket");
  app.add_option("--redis-failover-timeout", options.redis_failover_timeout,
                 "Sentinel, Cluster: wait this long for a failover (a master gone, hung or not "
                 "yet elected) before giving up on Redis")
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
                 "this host's bucket of the key; local:25%: at 25% of its rate), until Redis "
                 "answers again")
      ->transform(redis_error_policy())
      ->option_text("fail|allow|local[:N%]")
      ->group("Shared bucket");
}

backends::BackendOptions backend_options(const StoreOptions& options) {
  backends::BackendOptions backend{
      .local = {.directory = options.state_dir},
      .redis = {},
      .on_unavailable = parse_redis_error_policy(options.on_redis_error),
      .notify =
          [verbose = options.verbose](const std::string& message) {
            if (verbose) fmt::print(stderr, "ratelimit: {}\n", message);
          },
      .warn = [](const std::string& message) { fmt::print(stderr, "ratelimit: {}\n", message); }};
  if (!options.redis.empty())
    backend.redis =
        backends::RedisOptions{.url = options.redis,
                               .timeout = std::chrono::ceil<std::chrono::milliseconds>(
                                   parse_redis_timeout(options.redis_timeout)),
                               .failover_timeout = std::chrono::ceil<std::chrono::milliseconds>(
                                   parse_redis_timeout(options.redis_failover_timeout)),
                               .tls = {.ca_file = options.redis_tls.ca_file,
                                       .cert_file = options.redis_tls.cert_file,
                                       .key_file = options.redis_tls.key_file,
                                       .verify = !options.redis_tls_insecure}};
  return backend;
}

std::unique_ptr<backends::BucketBackend> open_backend(const StoreOptions& options) {
  return backends::open_backend(backend_options(options));
}

bool may_hold_buckets(const StoreOptions& options) {
  return !options.redis.empty() || std::filesystem::exists(options.state_dir);
}

std::string store_of(const StoreOptions& options) {
  return backends::describe_store(backend_options(options));
}

void add_permit_options(CLI::App& app, PermitOptions& options) {
  add_bucket_options(app, options.bucket, format::Counted::permits);
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
  ParsedBucket bucket = parse_bucket_options(options.bucket, format::Counted::permits);
  request.params = bucket.params;
  request.schedule = std::move(bucket.key_schedule);
  request.permits = options.permits;
  for (std::size_t i = 0; i < bucket.quotas.size(); ++i)
    if (options.permits > bucket.quotas[i].limit)
      throw UsageError(fmt::format("--permits {} is more than quota '{}' ever allows",
                                   options.permits, options.bucket.quotas[i]));
  request.quotas = std::move(bucket.quotas);
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
  if (max_inflight > 0)
    slots = std::make_unique<backends::StateDirectorySlots>(
        backends::StateDirectory::open(options.store.state_dir));
  exec::Admission admission;
  exec::AdmissionRequest request;
  {
    io::SignalGuard guard;
    io::SignalWaiter waiter(guard);
    request = {.permits = to_permit_request(options, waiter.now()), .max_inflight = max_inflight};
    admission = exec::admit(*backend, slots.get(), waiter, request);
  }
  if (admission.replaced_params)
    announce_replaced_params(
        options.key,
        {*admission.replaced_params, admission.replaced_timetable, admission.replaced_quotas},
        {request.permits.params, request.permits.schedule.timetable, request.permits.quotas},
        notation_of(options.bucket, format::Counted::permits));
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
