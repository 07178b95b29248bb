
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/shared_bucket_options.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::cli {
namespace {

struct ResetOptions {
  StoreOptions store;
  std::string key;
};

int run_reset(const ResetOptions& options) {
  // Nothing is created to find that nothing is there; an unknown key is said, as status says it.
  if (!may_hold_buckets(options.store) ||
      !stores::open_store(options.store.stores)->reset(options.key))
    throw no_bucket(options.key, options.store);
  return exit_ok;
}

}  // namespace

Command setup_reset(CLI::App& app) {
  auto options = std::make_shared<ResetOptions>();
  CLI::App* reset =
      app.add_subcommand("reset", "Forget a shared bucket: its next use starts fresh");
  add_store_options(*reset, options->store);
  add_key_option(*reset, options->key)->required();
  reset->footer(R"(Example:
  ratelimit reset --key api         the next 'exec --key api' starts a fresh bucket)");
  return {reset, [options] { return run_reset(*options); }};
}

}  // namespace ratelimit::cli
