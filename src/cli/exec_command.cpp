#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/throttle_report.hpp"
#include "cli/units.hpp"
#include "io/exec.hpp"
#include "ratelimit/clock.hpp"
#include "state/key_file_names.hpp"

namespace ratelimit::cli {
namespace {

struct ExecOptions {
  PermitOptions permits;
  int max_inflight = 0;
  // The command's exit statuses that mean the service said "too many": the key backs off.
  std::vector<int> throttled_statuses;
  int retries = 0;  // --retry: runs again after a throttled status, at most this many times
  std::vector<std::string> command;
};

// As a shell says it: 127 "command not found", else 126 with the errno's text.
int command_failed(const std::string& name, int error) {
  const bool not_found = error == ENOENT;
  fmt::print(stderr, "ratelimit: {}: {}\n", name,
             not_found ? "command not found" : std::strerror(error));
  return not_found ? exit_command_not_found : exit_cannot_execute;
}

// Without --key, the bucket of the command's name ("curl" for /usr/bin/curl): the calls of one
// loop share it, and unrelated loops do not refuse each other or change each other's rate. The
// name is checked as --key is.
std::string key_of(const ExecOptions& options) {
  if (!options.permits.key.empty()) return options.permits.key;
  std::string name = std::filesystem::path(options.command.front()).filename().string();
  state::validate_key(name);
  return name;
}

// With --throttled-status, the command runs as a child, so that its status can be reported to the
// key (the request it made was sent no earlier than it started) and the command run again.
int run_reporting_throttles(const ExecOptions& options, const PermitOptions& permits) {
  const auto throttled = [&](int status) {
    return std::find(options.throttled_statuses.begin(), options.throttled_statuses.end(),
                     status) != options.throttled_statuses.end();
  };
  for (int run = 0;; ++run) {
    bool reported = false;
    const int status = admit_then("exec", permits, options.max_inflight, [&](exec::Admission&) {
      const std::chrono::nanoseconds started = system_clock().now();
      const io::CommandEnd command = io::run_to_completion(options.command);
      // Stopped (a signal passed on to the command): its status, neither reported nor run again.
      if (command.stop_signal == 0 && throttled(command.status)) {
        const std::unique_ptr<stores::BucketStore> store = stores::open_store(permits.store.stores);
        report_throttle(*store, permits.key, system_clock().now() - started,
                        std::chrono::nanoseconds::zero(), std::chrono::nanoseconds::zero(),
                        permits.store);
        reported = true;
      }
      return command.status;
    });
    if (!reported || run >= options.retries) return status;
  }
}

int run_exec(const ExecOptions& options) {
  // Looked up before a permit is taken: a typo must not wait for, and use up, a permit.
  if (const int error = io::find_command(options.command.front()); error != 0)
    return command_failed(options.command.front(), error);
  PermitOptions permits = options.permits;
  permits.key = key_of(options);
  if (!options.throttled_statuses.empty()) return run_reporting_throttles(options, permits);
  return admit_then("exec", permits, options.max_inflight, [&](exec::Admission& admission) {
    // The slot stays taken while the command (and whatever inherits the descriptor) runs; the
    // bucket's file was closed when the permits were booked and never reaches the command.
    if (admission.slot) io::keep_across_exec(admission.slot);
    return command_failed(options.command.front(), io::replace_process(options.command));
  });
}

// Whether the next word of the command line is the value of `word`, one or several of exec's
// options: "--rate" or "-k" is followed by its value, "--rate=5", "-k5" and "-vk5" carry it.
bool value_follows(const CLI::App& exec, std::string_view word) {
  const auto takes_value = [](const CLI::Option* option) {
    return option != nullptr && option->get_items_expected_max() > 0;
  };
  if (word.starts_with("--"))
    return word.find('=') == std::string_view::npos &&
           takes_value(exec.get_option_no_throw(std::string(word)));
  for (std::size_t i = 1; i < word.size(); ++i) {
    if (takes_value(exec.get_option_no_throw(std::string{'-', word[i]})))
      return i + 1 == word.size();
  }
  return false;
}

// Where the command begins: after "--", or at the first word that is neither an option of exec's
// nor an option's value. CLI11 is never shown the command's words, as it would change some (it
// reads "[x]" or "a,b" as a list, for one); nice(1) and timeout(1) pass them on as they are.
int take_command_words(const CLI::App& exec, std::vector<std::string>& command, int argc,
                       char** argv) {
  int options_end = 2;  // after "ratelimit exec"
  while (options_end < argc) {
    const std::string_view word = argv[options_end];
    if (word == "--") {
      command.assign(argv + options_end + 1, argv + argc);
      return options_end;
    }
    if (word.size() < 2 || !word.starts_with('-')) break;
    options_end += value_follows(exec, word) ? 2 : 1;
  }
  options_end = std::min(options_end, argc);
  command.assign(argv + options_end, argv + argc);
  return options_end;
}

}  // namespace

Command setup_exec(CLI::App& app) {
  auto options = std::make_shared<ExecOptions>();
  CLI::App* exec =
      add_permit_subcommand(app, "exec", "run CMD", options->permits,
                            "[default: the command's name, e.g. curl for /usr/bin/curl]");
  exec->add_option("--max-inflight", options->max_inflight,
                   "At most this many commands of the key run at once")
      ->check(whole_number_in(1, 256))
      ->option_text("N")
      ->group("Shared bucket");
  CLI::Option* throttled =
      exec->add_option("--throttled-status", options->throttled_statuses,
                       "Exit statuses of CMD that mean the service said \"too many\" "
                       "(e.g. 75): every user of the key backs off")
          ->delimiter(',')
          ->check(whole_number_in(1, 255))
          ->option_text("STATUS,...")
          ->group("Back-off");
  exec->add_option("--retry", options->retries,
                   "Run CMD again, after the back-off, at most N times while it exits with a "
                   "throttled status; exit with its last status")
      ->check(whole_number_in(0, 1000))
      ->option_text("N")
      ->needs(throttled)
      ->group("Back-off");
  // Declared for the help and the "command is required" error only: CLI11 never sees its words.
  CLI::Option* command = exec->add_option("command", options->command,
                                          "The command to run and its arguments (-- before it "
                                          "is optional)")
                             ->option_text("...")
                             ->required();
  exec->footer(R"(Examples:
  ratelimit exec --rate 2/s --key api -- curl -s "$url"    2 starts a second, shared by a loop
  ratelimit exec --rate 100/m --max-inflight 4 -- make     100 a minute, 4 at once at most
  ratelimit exec --rate 1/s --try -- notify-send hi        exit 75 at once if no permit now
  ratelimit exec --key "site:$host" --rate 1/s --key all --rate 20/s -- curl -s "$url"
                                  1 a second per site and 20 in all, both or neither

Rates count commands: 2/s, 100/m, 1/h (no B or bit). Without --key the bucket is the command's
name (make, notify-send): every call of it shares one.)");
  return {.app = exec,
          .run = [options] { return run_exec(*options); },
          .take_command_words =
              [exec, command, options](int argc, char** argv) {
                const int options_end = take_command_words(*exec, options->command, argc, argv);
                command->required(options->command.empty());
                return options_end;
              }};
}

}  // namespace ratelimit::cli
