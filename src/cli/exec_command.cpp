#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "io/exec.hpp"

namespace ratelimit::cli {
namespace {

struct ExecOptions {
  PermitOptions permits;
  int max_inflight = 0;
  std::vector<std::string> command;
};

int run_exec(const ExecOptions& options) {
  return admit_then(options.permits, options.max_inflight, [&](exec::Admission& admission) {
    // The slot stays taken while the command (and whatever inherits the descriptor) runs; the
    // bucket's file was closed when the permits were booked and never reaches the command.
    if (admission.slot) io::keep_across_exec(admission.slot);
    const int error = io::replace_process(options.command);
    const bool not_found = error == ENOENT;
    fmt::print(stderr, "ratelimit: {}: {}\n", options.command.front(),
               not_found ? "command not found" : std::strerror(error));
    return not_found ? exit_command_not_found : exit_cannot_execute;
  });
}

}  // namespace

Command setup_exec(CLI::App& app) {
  auto options = std::make_shared<ExecOptions>();
  CLI::App* exec = app.add_subcommand(
      "exec", "Take permits from a bucket shared by every process of a shell loop, then run CMD");
  add_permit_options(*exec, options->permits);
  exec->add_option("--max-inflight", options->max_inflight,
                   "At most this many commands of the key run at once")
      ->check(whole_number_in(1, 256))
      ->group("Shared bucket");
  exec->add_option("command", options->command,
                   "The command to run and its arguments (-- before it is optional)")
      ->required();
  // As nice(1) or timeout(1): everything from the command on is the command's, its options too.
  exec->positionals_at_end();
  return {exec, [options] { return run_exec(*options); }};
}

}  // namespace ratelimit::cli
