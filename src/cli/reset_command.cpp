#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "exit_codes.hpp"

namespace ratelimit::cli {
namespace {

struct ResetOptions {
  StoreOptions store;
  std::string key;
};

int run_reset(const ResetOptions& options) {
  // Removing a bucket that is not there is not an error, as with rm -f.
  open_backend(options.store)->reset(options.key);
  return exit_ok;
}

}  // namespace

Command setup_reset(CLI::App& app) {
  auto options = std::make_shared<ResetOptions>();
  CLI::App* reset =
      app.add_subcommand("reset", "Forget a shared bucket: its next use starts fresh");
  add_store_options(*reset, options->store);
  add_key_option(*reset, options->key)->required();
  return {reset, [options] { return run_reset(*options); }};
}

}  // namespace ratelimit::cli
