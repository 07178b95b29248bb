#include <memory>

#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "exit_codes.hpp"

namespace ratelimit::cli {
namespace {

int run_acquire(const PermitOptions& options) {
  const exec::AdmissionRequest request{.permits = to_permit_request(options), .max_inflight = 0};
  SharedBuckets buckets(options.store);
  const exec::Admission admission = exec::admit(buckets.backend(), buckets.directory(), request);
  if (admission.result != exec::AdmissionResult::admitted) return exit_status_of_refusal(admission);
  return exit_ok;
}

}  // namespace

Command setup_acquire(CLI::App& app) {
  auto options = std::make_shared<PermitOptions>();
  CLI::App* acquire = app.add_subcommand(
      "acquire", "Take permits from a bucket shared by every process of a shell loop, then exit 0");
  add_permit_options(*acquire, *options);
  return {acquire, [options] { return run_acquire(*options); }};
}

}  // namespace ratelimit::cli
