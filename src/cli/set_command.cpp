#include <cerrno>
#include <string>
#include <system_error>

#include "cli/commands.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "pipe/control.hpp"

namespace ratelimit::cli {
namespace {

struct SetOptions {
  long pid = 0;
  std::string rate;
};

int run_set(const SetOptions& options) {
  const Rate rate = parse_rate(options.rate);
  try {
    pipe::send_rate_message(
        options.pid, pipe::RateMessage{rate.units_per_second, rate.unit != DataUnit::unspecified});
  } catch (const std::system_error& error) {
    if (error.code() == std::errc::no_such_file_or_directory ||
        error.code() == std::errc::no_such_device_or_address)
      throw UsageError("no ratelimit pipe runs as process " + std::to_string(options.pid));
    throw;
  }
  return exit_ok;
}

}  // namespace

Command setup_set(CLI::App& app) {
  auto options = std::make_shared<SetOptions>();
  CLI::App* set = app.add_subcommand("set", "Change the rate of a running ratelimit pipe");
  set->add_option("PID", options->pid, "Process id of the running pipe")
      ->required()
      ->check(CLI::PositiveNumber);
  set->add_option("-r,--rate", options->rate,
                  "The new rate, in the pipe's units (B or bit only in byte mode)")
      ->required()
      ->check(syntax_check(parse_rate, "RATE"));
  return Command{set, [options] { return run_set(*options); }};
}

}  // namespace ratelimit::cli
