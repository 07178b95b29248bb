#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/help.hpp"
#include "cli/typo_hints.hpp"
#include "cli/units.hpp"
#include "errors.hpp"
#include "io/posix.hpp"

namespace {

std::string version_text() {
  return fmt::format("ratelimit {} (fmt {}.{}.{}, CLI11 {})", RATELIMIT_VERSION,
                     FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100,
                     CLI11_VERSION);
}

struct Subcommand {
  std::string_view name;
  ratelimit::cli::Command (*setup)(CLI::App&);
};

constexpr Subcommand kSubcommands[] = {
    {"exec", ratelimit::cli::setup_exec},         {"acquire", ratelimit::cli::setup_acquire},
    {"status", ratelimit::cli::setup_status},     {"reset", ratelimit::cli::setup_reset},
    {"set", ratelimit::cli::setup_set},           {"agent", ratelimit::cli::setup_agent},
    {"throttle", ratelimit::cli::setup_throttle},
};

// Declaring options is most of the work of a call of `ratelimit exec`, which a shell loop pays on
// every iteration (bench/results/exec.md): when the first argument names a subcommand, only that
// one is declared. Otherwise every command is, the pipe mode of the top-level app last, since the
// top-level app counts as parsed whatever subcommand was given.
std::vector<ratelimit::cli::Command> declare_commands(CLI::App& app, int argc, char** argv) {
  if (argc > 1) {
    for (const Subcommand& subcommand : kSubcommands) {
      if (argv[1] == subcommand.name) return {subcommand.setup(app)};
    }
  }
  std::vector<ratelimit::cli::Command> commands;
  for (const Subcommand& subcommand : kSubcommands) commands.push_back(subcommand.setup(app));
  commands.push_back(ratelimit::cli::setup_pipe(app));
  return commands;
}

// The commands that declare `option`, declared anew for the question: a command line names only
// its own command, and only that one was declared.
std::vector<std::string> commands_with(const std::string& option) {
  CLI::App scratch;
  std::vector<std::string> names;
  for (const Subcommand& subcommand : kSubcommands) {
    if (subcommand.setup(scratch).app->get_option_no_throw(option))
      names.emplace_back(subcommand.name);
  }
  if (ratelimit::cli::setup_pipe(scratch).app->get_option_no_throw(option))
    names.emplace_back("the pipe");
  return names;
}

// The command the command line runs: a subcommand, or the pipe (the top-level app).
const CLI::App& command_given(const CLI::App& app, int argc, char** argv) {
  if (argc > 1) {
    for (const CLI::App* subcommand : app.get_subcommands({})) {
      if (subcommand->get_name() == argv[1]) return *subcommand;
    }
  }
  return app;
}

// How many words of the command line CLI11 parses: all but those of the command exec runs.
int words_to_parse(const std::vector<ratelimit::cli::Command>& commands, int argc, char** argv) {
  for (const auto& command : commands) {
    if (command.take_command_words && argc > 1 && command.app->get_name() == argv[1])
      return command.take_command_words(argc, argv);
  }
  return argc;
}

// The whole program but its exit-status ladder.
int run_ratelimit(int argc, char** argv) {
  ratelimit::io::reserve_standard_streams();
  CLI::App app{"ratelimit: shape a stream or a shell loop to a rate, with a token bucket",
               "ratelimit"};
  app.formatter(ratelimit::cli::help_formatter());
  app.set_version_flag("-V,--version", version_text());
  app.footer(R"(Examples:
  producer | ratelimit --rate 5000 | consumer          5000 bytes a second
  ratelimit -l --rate 20 urls.txt | xargs -n1 curl     20 lines a second, never split
  ratelimit --rate 10MiB/s --progress big.iso -o /backup/big.iso
  ratelimit --rate 10MB/s --quota 50GB/d --key backup dump -o /backup/dump
  ratelimit --key "host:$h" --rate 10MB/s --key fleet --rate 50MB/s dump   per host, in all
  ratelimit exec --rate 2/s --key api -- curl -s "$url"   2 starts a second, shared by a loop

'ratelimit COMMAND --help' or 'ratelimit help COMMAND' shows a command's options;
'man ratelimit' tells the whole story: in the source tree 'man ./man/ratelimit.1', or after
'cmake --install build/release --prefix ~/.local' (which puts ratelimit in ~/.local/bin).)");
  std::vector<char*> arguments =
      ratelimit::cli::check_command_words(std::vector<char*>(argv, argv + argc));
  ratelimit::cli::check_typos(arguments);
  argc = static_cast<int>(arguments.size());
  argv = arguments.data();
  const std::vector<ratelimit::cli::Command> commands = declare_commands(app, argc, argv);
  for (const auto& command : commands) {
    if (command.app != &app) command.app->set_version_flag("-V,--version", version_text());
  }
  const CLI::App& given = command_given(app, argc, argv);
  ratelimit::cli::check_options_of(given, &given == &app ? "the pipe" : given.get_name(), arguments,
                                   commands_with);

  // CLI11 delivers help and the version as exceptions, and an unknown word is given a suggestion
  // from the commands declared here; any other ParseError is the ladder's.
  try {
    app.parse(words_to_parse(commands, argc, argv), argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ExtrasError& error) {
    throw ratelimit::UsageError(ratelimit::cli::with_suggestion(error.what(), app));
  }

  for (const auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return ratelimit::cli::exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  // Everything inside the one ladder of exit statuses: declaring the options may already run out
  // of memory.
  return ratelimit::cli::run_command({nullptr, [&] { return run_ratelimit(argc, argv); }});
}
