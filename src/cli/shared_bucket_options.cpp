#include "cli/shared_bucket_options.hpp"

#include <fmt/core.h>

#include <limits>

#include "backends/state_file_format.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "ratelimit/clock.hpp"

namespace ratelimit::cli {

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
}

backends::StateFileBackend open_backend(const StoreOptions& options) {
  auto notify = [verbose = options.verbose](const std::string& message) {
    if (verbose) fmt::print(stderr, "ratelimit: {}\n", message);
  };
  return backends::StateFileBackend(
      backends::StateDirectory::open(backends::state_dir_from_environment(options.state_dir)),
      system_clock(), backends::read_boot_id(), notify);
}

void add_permit_options(CLI::App& app, PermitOptions& options) {
  add_bucket_options(app, options.bucket, RateUnits::plain);
  add_store_options(app, options.store);
  add_key_option(app, options.key)->description("Name of the shared bucket [default: default]");
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
