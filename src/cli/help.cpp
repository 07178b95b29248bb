#include "cli/help.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include "cli/units.hpp"
#include "format/words.hpp"
#include "stores/open_store.hpp"

namespace ratelimit::cli {
namespace {

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(32); }

  std::string make_option_name(const CLI::Option* option, bool is_positional) const override {
    if (is_positional) return option->get_name(true, false);
    std::vector<std::string> names;
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    return CLI::detail::join(names, ",");
  }

  // CLI11 writes "ratelimit [OPTIONS] [FILE...] [SUBCOMMAND]", but a command must come first:
  // the pipe's usage and the commands' on a line each.
  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string usage = CLI::Formatter::make_usage(app, name);
    constexpr std::string_view kCommandLast = " [SUBCOMMAND]";
    const std::size_t at = usage.find(kCommandLast);
    if (at == std::string::npos) return usage;
    usage.erase(at, kCommandLast.size());
    usage.insert(usage.find('\n', at), fmt::format("\n       {} COMMAND [OPTIONS] ...", name));
    return usage;
  }

  std::string make_option_opts(const CLI::Option* option) const override {
    const std::string& text = option->get_option_text();
    if (text.empty()) return "";
    return text.starts_with('[') ? text : " " + text;
  }
};

const std::vector<std::string> kCommandNames = {"exec", "acquire", "status", "reset", "set"};

void collect_option_names(const CLI::App& app, std::vector<std::string>& names) {
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  for (const CLI::App* subcommand : app.get_subcommands({}))
    collect_option_names(*subcommand, names);
}

// `ratelimit help WORD` for a WORD that names no command.
UsageError unknown_command(const std::string& word) {
  if (const auto command = format::nearest_word(word, kCommandNames))
    return UsageError(fmt::format("unknown command '{}'; did you mean '{}'?", word, *command));
  return UsageError(fmt::format("unknown command '{}' (the commands are {})", word,
                                fmt::join(kCommandNames, ", ")));
}

}  // namespace

bool is_command(std::string_view word) {
  return std::find(kCommandNames.begin(), kCommandNames.end(), word) != kCommandNames.end();
}

namespace {

// Every option of the commands that takes a value, and what that value is, for "--key needs a
// NAME"; the stores' options say it themselves (stores/store_option.hpp).
struct ValueOption {
  std::string_view name;
  std::string_view value;
};

constexpr ValueOption kValueOptions[] = {
    {"-o", "a FILE"},
    {"--output", "a FILE"},
    {"-k", "a NAME"},
    {"--key", "a NAME"},
    {"--delimiter", "a CHAR"},
    {"--state-dir", "a DIR"},
    {"-r", "a RATE"},
    {"--rate", "a RATE"},
    {"--quota", "a QUOTA (N/PERIOD)"},
    {"--burst", "a BURST (a time or an amount)"},
    {"--warmup", "a DURATION"},
    {"--cold-factor", "a number"},
    {"--chunk", "a SIZE or a TIME"},
    {"-s", "a SIZE"},
    {"--size", "a SIZE"},
    {"--timeout", "a DURATION"},
    {"--permits", "a number"},
    {"--max-inflight", "a number"},
};

}  // namespace

std::optional<std::string_view> value_of_option(std::string_view option) {
  for (const ValueOption& known : kValueOptions) {
    if (option == known.name) return known.value;
  }
  for (const auto& declared : stores::store_options()) {
    if (option == declared.text.name && declared.text.kind != stores::OptionKind::flag)
      return declared.text.value_said;
  }
  return std::nullopt;
}

bool takes_value(std::string_view option) { return value_of_option(option).has_value(); }

std::vector<char*> check_command_words(std::vector<char*> arguments) {
  static char help_flag[] = "--help";
  if (arguments.size() > 1 && std::string_view(arguments[1]) == "help") {
    arguments.erase(arguments.begin() + 1);
    if (arguments.size() > 1 && !is_command(arguments[1])) throw unknown_command(arguments[1]);
    arguments.push_back(help_flag);
    return arguments;
  }
  if (arguments.size() < 2 || is_command(arguments[1])) return arguments;
  const std::string first = arguments[1];
  if (!first.starts_with('-') && !std::filesystem::exists(first)) {
    if (const auto command = format::nearest_word(first, kCommandNames))
      throw UsageError(
          fmt::format("{}: neither a file nor a command; did you mean '{}'?", first, *command));
  }
  for (std::size_t i = 1; i < arguments.size(); ++i) {
    const std::string_view word = arguments[i];
    if (word == "--") break;
    if (is_command(word) && !takes_value(arguments[i - 1]) && !std::filesystem::exists(word)) {
      std::string rewritten = fmt::format("ratelimit {}", word);
      for (std::size_t j = 1; j < arguments.size(); ++j) {
        if (j != i) rewritten += fmt::format(" {}", arguments[j]);
      }
      throw UsageError(fmt::format("'{}' is a command and comes first: {}", word, rewritten));
    }
  }
  return arguments;
}

std::string with_suggestion(const std::string& given, const CLI::App& app) {
  // CLI11 lists the words last first ("not expected: hi echo"): in the order given instead.
  const std::vector<std::string> extras = app.remaining(true);
  const std::string message =
      extras.empty()
          ? given
          : fmt::format("{} {}", given.substr(0, given.find(':') + 1), fmt::join(extras, " "));
  std::vector<std::string> names;
  collect_option_names(app, names);
  std::istringstream words(message.substr(message.find(':') + 1));
  std::string word;
  while (words >> word) {
    if (!word.starts_with("--")) continue;
    if (const auto option = format::nearest_word(word.substr(0, word.find('=')), names))
      return fmt::format("{}; did you mean {}?", message, *option);
  }
  return message;
}

CLI::Validator one_of(std::vector<std::string> choices) {
  return CLI::Validator(
      [choices](std::string& text) -> std::string {
        std::string word = text;
        std::transform(word.begin(), word.end(), word.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (std::find(choices.begin(), choices.end(), word) == choices.end())
          return format::not_one_of(text, choices);
        text = word;
        return {};
      },
      fmt::format("{}", fmt::join(choices, "|")));
}

std::shared_ptr<CLI::Formatter> help_formatter() { return std::make_shared<HelpFormatter>(); }

}  // namespace ratelimit::cli
