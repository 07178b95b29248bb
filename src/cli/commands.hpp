#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace ratelimit::cli {

// One command of the binary: the CLI11 (sub)command it declared its options on, and what runs it
// once the command line is parsed. Each lives in its own file, as CLI11's subcom_in_files example.
struct Command {
  CLI::App* app;
  std::function<int()> run;
  // Only for a command that runs another (exec): keeps the words of the command line that belong
  // to the command it runs, verbatim, and returns how many words before them CLI11 is to parse.
  std::function<int(int argc, char** argv)> take_command_words = {};
};

// Shared buckets (exec_command.cpp, acquire_command.cpp, status_command.cpp, reset_command.cpp).
Command setup_exec(CLI::App& app);
Command setup_acquire(CLI::App& app);
Command setup_status(CLI::App& app);
Command setup_reset(CLI::App& app);
// `ratelimit throttle --key K`: every user of a key backs off (throttle_command.cpp).
Command setup_throttle(CLI::App& app);
// The default command, on the top-level app: `ratelimit --rate RATE [FILE...]`. Declared last, as
// the top-level app counts as parsed whatever subcommand was given.
Command setup_pipe(CLI::App& app);
// `ratelimit agent`: the host agent (agent/agent.hpp), started on demand.
Command setup_agent(CLI::App& app);
// `ratelimit set PID --rate RATE`: a new rate for a running pipe.
Command setup_set(CLI::App& app);

// Runs a parsed command and returns its exit status; whatever it throws becomes one line on
// standard error and its exit status (docs/architecture.md, "Errors"): 64 usage, 66 input, 69 store
// unavailable, 74 I/O, 77 unsafe state, 70 anything unforeseen (out of memory too).
int run_command(const Command& command);

}  // namespace ratelimit::cli
