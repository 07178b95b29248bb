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

// As a shell says it: 127 "command not found", else 126 with the errno's text.
int command_failed(const std::string& name, int error) {
  const bool not_found = error == ENOENT;
  fmt::print(stderr, "ratelimit: {}: {}\n", name,
             not_found ? "command not found" : std::strerror(error));
  return not_found ? exit_command_not_found : exit_cannot_execute;
}

int run_exec(const ExecOptions& options) {
  // Looked up before a permit is taken: a typo must not wait for, and use up, a permit.
  if (const int error = io::find_command(options.command.front()); error != 0)
    return command_failed(options.command.front(), error);
  return admit_then(options.permits, options.max_inflight, [&](exec::Admission& admission) {
    // The slot stays taken while the command (and whatever inherits the descriptor) runs; the
    // bucket's file was closed when the permits were booked and never reaches the command.
    if (admission.slot) io::keep_across_exec(admission.slot);
    return command_failed(options.command.front(), io::replace_process(options.command));
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
      ->option_text("N")
      ->group("Shared bucket");
  exec->add_option("command", options->command,
                   "The command to run and its arguments (-- before it is optional)")
      ->option_text("...")
      ->required();
  // As nice(1) or timeout(1): everything from the command on is the command's, its options too.
  exec->positionals_at_end();
  exec->footer(R"(Examples:
  ratelimit exec --rate 2/s --key api -- curl -s "$url"    2 starts a second, shared by a loop
  ratelimit exec --rate 100/m --max-inflight 4 -- make     100 a minute, 4 at once at most
  ratelimit exec --rate 1/s --try -- notify-send hi        exit 75 at once if no permit now

Rates count commands: 2/s, 100/m, 1/h (no B or bit).)");
  return {exec, [options] { return run_exec(*options); }};
}

}  // namespace ratelimit::cli
