#include <chrono>
#include <memory>
#include <string>

#include "agent/agent.hpp"
#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/units.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::cli {
namespace {

struct AgentOptions {
  std::string state_dir;
  std::chrono::nanoseconds idle = std::chrono::seconds(60);
};

int run_agent(const AgentOptions& options) {
  agent::run_agent(state::state_dir_from_environment(options.state_dir), options.idle);
  return exit_ok;
}

}  // namespace

Command setup_agent(CLI::App& app) {
  auto options = std::make_shared<AgentOptions>();
  CLI::App* agent = app.add_subcommand(
      "agent",
      "Keep the Redis connections of this user's ratelimit processes on this host (started on "
      "demand by exec, acquire and pipes; not needed by hand)");
  // Not in --help's list of commands: nobody needs to run it by hand (the man page tells of it).
  agent->group("");
  agent
      ->add_option("--state-dir", options->state_dir,
                   "Directory of the agent's socket [default: as exec's]")
      ->option_text("DIR");
  add_read_option(*agent, "--idle", options->idle, parse_duration, "DURATION",
                  "End after this long without a request [default: $RATELIMIT_AGENT_IDLE, 60s]")
      ->envname("RATELIMIT_AGENT_IDLE");
  return {agent, [options] { return run_agent(*options); }};
}

}  // namespace ratelimit::cli
