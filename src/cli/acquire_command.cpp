#include <fmt/core.h>

#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/shared_bucket_options.hpp"
#include "errors.hpp"

namespace ratelimit::cli {
namespace {

int run_acquire(const PermitOptions& options) {
  // No bucket everybody shares by default: unrelated loops would refuse each other's permits.
  if (options.key.empty())
    throw UsageError(
        "acquire needs --key NAME: the bucket that the calls of one loop share (e.g. --key mail)");
  return admit_then("acquire", options, 0, [&options](const exec::Admission& admission) {
    // Where the store's grant moment lies, for whoever checks a limit from outside (a quota's
    // windows): on the clock every process of the host shares.
    if (options.store.verbose >= 2) {
      const auto seconds = [](std::chrono::nanoseconds t) {
        return fmt::format("{}.{:09}", t.count() / 1'000'000'000, t.count() % 1'000'000'000);
      };
      std::string keys = fmt::format("key '{}'", options.key);
      if (!options.more_keys.empty()) {
        keys = fmt::format("keys '{}'", options.key);
        for (const KeyOptions& more : options.more_keys) keys += fmt::format(", '{}'", more.key);
      }
      fmt::print(stderr,
                 "ratelimit: {}: {} {} granted between {} and {} s on the monotonic clock\n", keys,
                 options.permits, options.permits == 1 ? "permit" : "permits",
                 seconds(admission.granted_from), seconds(admission.granted_by));
    }
    return exit_ok;
  });
}

}  // namespace

Command setup_acquire(CLI::App& app) {
  auto options = std::make_shared<PermitOptions>();
  CLI::App* acquire = add_permit_subcommand(app, "acquire", "exit 0", *options, "(required)");
  acquire->footer(R"(Examples:
  ratelimit acquire --rate 100/m --key mail && sendmail "$to" < message
  ratelimit acquire --rate 10/s --permits 5 --key api      take 5 permits at once
  ratelimit acquire --rate 1/h --try --key report || exit 0
  ratelimit acquire --rate 10/s --quota 5000/h --key api   and at most 5000 in any hour
  ratelimit acquire --key "user:$u" --rate 1/s --key all --rate 10/s --try   both or neither

Rates count permits: 2/s, 100/m, 1/h (no B or bit).)");
  return {acquire, [options] { return run_acquire(*options); }};
}

}  // namespace ratelimit::cli
