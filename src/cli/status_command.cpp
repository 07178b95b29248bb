#include <fmt/core.h>

#include <chrono>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "exit_codes.hpp"

namespace ratelimit::cli {
namespace {

struct StatusOptions {
  StoreOptions store;
  std::string key;  // empty: every bucket
};

double seconds(std::chrono::nanoseconds duration) {
  return std::chrono::duration<double>(duration).count();
}

std::string describe_shape(const BucketParams& params) {
  std::string shape =
      params.shape == BucketShape::warming_up
          ? fmt::format("warmup {:g}s x{:g}", seconds(params.warmup), params.cold_factor)
          : fmt::format("burst {:g}s", params.max_burst_seconds);
  if (params.start_full) shape += " start-full";
  if (params.pay_first) shape += " pay-first";
  return shape;
}

std::string describe_next_free(std::chrono::nanoseconds next_free_in) {
  // A booking at a vanishing rate saturates near 292 years: no one waits for it.
  constexpr std::chrono::nanoseconds kCentury = std::chrono::hours(24 * 36525);
  if (next_free_in <= std::chrono::nanoseconds::zero()) return "now";
  if (next_free_in > kCentury) return "in over 100 years";
  return fmt::format("in {:.3f}s", seconds(next_free_in));
}

int run_status(const StatusOptions& options) {
  const auto backend = open_backend(options.store);
  const auto buckets =
      backend->status(options.key.empty() ? std::nullopt : std::optional(options.key));
  if (buckets.empty() && !options.key.empty()) {
    fmt::print(stderr, "ratelimit: no bucket '{}' in {}\n", options.key, store_of(options.store));
    return exit_no_input;
  }
  constexpr auto kRow = "{:<20} {:>12} {:<20} {:>12} {}\n";
  fmt::print(kRow, "KEY", "RATE/S", "SHAPE", "STORED", "NEXT FREE");
  for (const auto& bucket : buckets) {
    if (!bucket.problem.empty()) {
      fmt::print("{:<20} unusable ({}): fresh on next use\n", bucket.key, bucket.problem);
      continue;
    }
    fmt::print(kRow, bucket.key, fmt::format("{:g}", bucket.params.permits_per_second),
               describe_shape(bucket.params), fmt::format("{:.2f}", bucket.stored_permits),
               describe_next_free(bucket.next_free_in));
  }
  return exit_ok;
}

}  // namespace

Command setup_status(CLI::App& app) {
  auto options = std::make_shared<StatusOptions>();
  CLI::App* status = app.add_subcommand("status", "List the shared buckets");
  add_store_options(*status, options->store);
  add_key_option(*status, options->key)->description("Show only this bucket");
  return {status, [options] { return run_status(*options); }};
}

}  // namespace ratelimit::cli
