#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ratelimit::cli {

// Renders options as the man page writes them: "-r,--rate RATE", "-p,--progress[=force]",
// "--permits N", without CLI11's "TEXT:RATE", "{auto} :{auto,force}" or
// "INT:1..9223372036854775807=1". Each option that takes a value names it with option_text(); flags
// show only their names.
std::shared_ptr<CLI::Formatter> help_formatter();

// A CLI11 transform for an option whose value is one word of `choices`, in any case (turned to
// lower case): otherwise "invalid value 'lcoal': expected fail, allow or local; did you mean
// 'local'?", which CLI11 prefixes with the option's name. Declared after a transform that maps
// the word (transforms run last declared first), it checks the word before that one sees it.
CLI::Validator one_of(std::vector<std::string> choices);

// Whether `word` names a command: exec, acquire, status, reset or set.
bool is_command(std::string_view word);
// Whether the option `option`, written alone ("--rate", "-k"), takes the next word as its value.
bool takes_value(std::string_view option);
// What that value is, as an error says it is missing ("a URL" for --redis); none for an option
// that takes no value.
std::optional<std::string_view> value_of_option(std::string_view option);

// The command line with `help [COMMAND]` read as `[COMMAND] --help`. Throws UsageError for a
// command word that is misspelt ("exce: neither a file nor a command; did you mean 'exec'?") or
// not first ("ratelimit --rate 5 exec -- true"), which the parser would take for a file.
std::vector<char*> check_command_words(std::vector<char*> arguments);

// CLI11's "The following arguments were not expected: --rat" with the words in the order given
// and "; did you mean --rate?" when an option of `app` or its subcommands is near.
std::string with_suggestion(const std::string& message, const CLI::App& app);

}  // namespace ratelimit::cli
