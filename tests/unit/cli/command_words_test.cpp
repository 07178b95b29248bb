#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>

#include "cli/commands.hpp"
#include "cli/help.hpp"

namespace ratelimit::cli {
namespace {

// The command-line checks that run before any option is declared must know every option that
// takes a value, or they read that value as a file or a command (`--redis-tls-ca FILE`).
TEST(CommandWords, EveryOptionThatTakesAValueIsKnownBeforeOptionsAreDeclared) {
  CLI::App app;
  setup_pipe(app);
  setup_exec(*app.add_subcommand("exec"));
  setup_acquire(*app.add_subcommand("acquire"));
  setup_status(*app.add_subcommand("status"));
  setup_reset(*app.add_subcommand("reset"));
  setup_set(*app.add_subcommand("set"));
  std::vector<const CLI::App*> apps{&app};
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    apps.push_back(sub);
  for (const CLI::App* each : apps) {
    for (const CLI::Option* option : each->get_options()) {
      if (option->get_positional() || option->get_expected_min() == 0) continue;
      for (const std::string& name : option->get_lnames())
        EXPECT_TRUE(takes_value("--" + name)) << "--" << name;
      for (const std::string& name : option->get_snames())
        EXPECT_TRUE(takes_value("-" + name)) << "-" << name;
    }
  }
}

}  // namespace
}  // namespace ratelimit::cli
