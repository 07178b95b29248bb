#include "cli/typo_hints.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "cli/help.hpp"
#include "cli/units.hpp"
#include "errors.hpp"
#include "stores/open_store.hpp"

namespace ratelimit::cli {
namespace {

// What an option's value is written in: its name in messages, and its parser (throws
// UsageError).
struct ValueKind {
  std::string_view name;
  void (*parse)(std::string_view text);
};

constexpr ValueKind kRate{"rate", [](std::string_view text) { parse_rate(text); }};
constexpr ValueKind kBurst{"burst", [](std::string_view text) {
                             if (ends_in_time_unit(text))
                               parse_duration(text);
                             else
                               parse_size(text);
                           }};
constexpr ValueKind kDuration{"duration", [](std::string_view text) { parse_duration(text); }};
constexpr ValueKind kSize{"size", [](std::string_view text) { parse_size(text); }};

std::optional<ValueKind> kind_of(std::string_view option) {
  if (option == "-r" || option == "--rate") return kRate;
  if (option == "--burst") return kBurst;
  if (option == "--timeout" || option == "--warmup") return kDuration;
  if (option == "--chunk" || option == "--size" || option == "-s") return kSize;
  for (const auto& declared : stores::store_options()) {
    if (option == declared.text.name && declared.text.kind == stores::OptionKind::duration)
      return kDuration;
  }
  return std::nullopt;
}

bool parses_as(const ValueKind& kind, const std::string& text) {
  try {
    kind.parse(text);
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

// "5" and "kb" meant as one value: what to write instead, if the two read as one. A lone "b" is
// bytes or bits, so both are offered.
std::optional<std::string> joined_value(const ValueKind& kind, const std::string& value,
                                        const std::string& word, std::string_view option) {
  if (word.empty() || !(std::isalpha(static_cast<unsigned char>(word[0])) || word[0] == '/'))
    return std::nullopt;
  const std::string joined = value + word;
  if (parses_as(kind, joined)) return fmt::format("{} {}", option, joined);
  // "5 kb" or "5 kb/s": a lone "b" at the end or before the period.
  const std::size_t slash = std::min(joined.find('/'), joined.size());
  if (slash > value.size() && joined[slash - 1] == 'b') {
    const std::string stem = joined.substr(0, slash - 1);
    const std::string period = joined.substr(slash);
    if (parses_as(kind, stem + "B" + period) && parses_as(kind, stem + "bit" + period))
      return fmt::format("{} {}B{} (or {}bit{})", option, stem, period, stem, period);
  }
  return std::nullopt;
}

// "1,5M": a decimal comma, refused with the value it stands for.
void check_decimal_comma(const ValueKind& kind, const std::string& value, std::string_view option) {
  const std::size_t comma = value.find(',');
  if (comma == std::string::npos || comma == 0 || value.find(':') != std::string::npos ||
      !std::isdigit(static_cast<unsigned char>(value[comma - 1])) ||
      !std::isdigit(static_cast<unsigned char>(value[comma + 1])))
    return;
  std::string with_point = value;
  with_point[comma] = '.';
  if (parses_as(kind, with_point))
    throw UsageError(fmt::format("{}: invalid {} '{}': use a decimal point ({})", option, kind.name,
                                 value, with_point));
}

// The command line of exec for an acquire given a command: `words` from the one after "acquire",
// `command_at` the first word of the command (after "--" if there is one).
std::string as_exec(const std::vector<char*>& words, std::size_t command_at) {
  std::string line = "ratelimit exec";
  for (std::size_t i = 2; i < words.size(); ++i) {
    if (i == command_at && std::string_view(words[i - 1]) != "--") line += " --";
    line += fmt::format(" {}", words[i]);
  }
  return line;
}

// Whether `word` is an option ("--key", "-k", "--"), not a value that begins with a dash ("-" for
// standard output, "-5").
bool is_option(std::string_view word) {
  if (word.size() < 2 || word[0] != '-') return false;
  return word[1] == '-' || std::isalpha(static_cast<unsigned char>(word[1]));
}

// `--redis --key k`: an option written without its value, which would take the next option for
// it (or leave it without one at the end).
void check_value_given(const std::vector<char*>& arguments, std::size_t at) {
  const std::optional<std::string_view> value = value_of_option(arguments[at]);
  if (!value) return;
  if (at + 1 >= arguments.size())
    throw UsageError(fmt::format("{} needs {}", arguments[at], *value));
  if (is_option(arguments[at + 1]))
    throw UsageError(
        fmt::format("{} needs {} before {}", arguments[at], *value, arguments[at + 1]));
}

}  // namespace

void check_typos(const std::vector<char*>& arguments) {
  const std::string_view command =
      arguments.size() > 1 && is_command(arguments[1]) ? arguments[1] : "";
  for (std::size_t i = command.empty() ? 1 : 2; i < arguments.size(); ++i) {
    const std::string word = arguments[i];
    if (word == "--" || !word.starts_with('-')) {
      const std::size_t command_at = word == "--" ? i + 1 : i;
      if (command == "acquire" && command_at < arguments.size())
        throw UsageError(fmt::format("acquire runs no command: did you mean '{}'?",
                                     as_exec(arguments, command_at)));
      // exec's command begins here; other commands' words are files or a PID.
      if (word == "--" || command == "exec") return;
      continue;
    }
    if (word.starts_with("-p="))
      throw UsageError(fmt::format("invalid option '{}': write --progress={}", word,
                                   std::string_view(word).substr(3)));
    const std::size_t equals = word.find('=');
    if (equals == std::string::npos) check_value_given(arguments, i);
    const std::string option = word.substr(0, equals);
    const std::optional<ValueKind> kind = kind_of(option);
    if (!kind) {
      if (equals == std::string::npos && takes_value(option)) ++i;
      continue;
    }
    std::string value;
    if (equals != std::string::npos) {
      value = word.substr(equals + 1);
    } else if (i + 1 < arguments.size()) {
      value = arguments[++i];
    }
    check_decimal_comma(*kind, value, option);
    if (i + 1 >= arguments.size() || std::filesystem::exists(arguments[i + 1])) continue;
    const std::string next = arguments[i + 1];
    if (const auto meant = joined_value(*kind, value, next, option))
      throw UsageError(fmt::format("{} '{}': did you mean {}?",
                                   command.empty() ? "no file" : "stray word", next, *meant));
  }
}

namespace {

// What a pipe does instead of an option of exec or acquire.
std::string_view pipe_instead_of(std::string_view option) {
  if (option == "--try")
    return ": a pipe bounds its wait with --timeout DURATION, or ends at a spent quota with "
           "--stop-at-quota";
  if (option == "--permits") return ": a pipe takes one permit per unit it writes";
  return "";
}

// "exec", "exec and acquire", "exec, acquire and the pipe".
std::string listed(const std::vector<std::string>& names) {
  if (names.size() < 2) return fmt::format("{}", fmt::join(names, ""));
  return fmt::format("{} and {}", fmt::join(names.begin(), names.end() - 1, ", "), names.back());
}

}  // namespace

void check_options_of(const CLI::App& command, std::string_view command_name,
                      const std::vector<char*>& arguments, const CommandsWith& commands_with) {
  const bool pipe = command.get_parent() == nullptr;
  const bool runs_command = command.get_name() == "exec";
  // Options that take one value, with the value first given.
  std::map<std::string, std::string> given;
  // A pipe's Redis option, which only a key's bucket uses.
  std::string redis_option;
  bool key_given = false;
  bool key_given_before = false;  // a --key that starts a group of bucket options
  for (std::size_t i = pipe ? 1 : 2; i < arguments.size(); ++i) {
    const std::string word = arguments[i];
    if (word == "--") break;
    if (!is_option(word)) {
      if (runs_command) break;  // the command exec runs begins here
      continue;
    }
    const std::size_t equals = word.find('=');
    const std::string option = word.substr(0, equals);
    // Short options may be clustered (-l0): left to the parser.
    if (!option.starts_with("--") && option.size() != 2) continue;
    const CLI::Option* declared = command.get_option_no_throw(option);
    if (!declared) {
      const std::vector<std::string> others = commands_with(option);
      if (others.empty()) continue;
      throw UsageError(fmt::format("{} is an option of {}, not of {}{}", option, listed(others),
                                   command_name,
                                   pipe ? pipe_instead_of(option) : std::string_view()));
    }
    if (pipe && option.find("redis") != std::string::npos && redis_option.empty())
      redis_option = option;
    key_given = key_given || declared->check_name("--key");
    if (!takes_value(option)) continue;
    std::string value;
    if (equals != std::string::npos)
      value = word.substr(equals + 1);
    else if (i + 1 < arguments.size())
      value = arguments[++i];
    // exec and acquire read --key and the bucket options in order: each --key after the first
    // starts a group of its own (several keys in one call), where each bucket option may be
    // given once again.
    if (declared->get_trigger_on_parse() && declared->check_name("--key")) {
      if (key_given_before)
        std::erase_if(given, [&command](const auto& option_given) {
          const CLI::Option* option = command.get_option_no_throw(option_given.first);
          return option != nullptr && option->get_trigger_on_parse();
        });
      key_given_before = true;
      continue;
    }
    if (declared->get_multi_option_policy() != CLI::MultiOptionPolicy::Throw) continue;
    const auto [first, inserted] = given.emplace(declared->get_name(), value);
    if (!inserted)
      throw UsageError(fmt::format("{} given twice ('{}', then '{}'): give it once", option,
                                   first->second, value));
  }
  if (!redis_option.empty() && !key_given)
    throw UsageError(
        fmt::format("{} without --key: a pipe shares a bucket only by a key's name; add --key NAME",
                    redis_option));
}

}  // namespace ratelimit::cli
