#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ratelimit::cli {

// Looks at the command line, before the parser does, for what a user meant but wrote so that the
// parser would take a word for a file, a command or an unexpected argument, and throws UsageError
// saying what was meant:
//   ratelimit --rate 5 kb          no file 'kb': did you mean --rate 5kB (or 5kbit)?
//   acquire --timeout 2 s          stray word 's': did you mean --timeout 2s?
//   ratelimit --rate 1,5M          --rate: invalid rate '1,5M': use a decimal point (1.5M)
//   acquire --redis --key k        --redis needs a URL before --key
//   ratelimit -p=force             invalid option '-p=force': write --progress=force
//   acquire --rate 2/s -- echo hi  acquire runs no command: did you mean 'ratelimit exec ...'?
// A word that names an existing file is never second-guessed.
void check_typos(const std::vector<char*>& arguments);

// The commands that declare an option ("exec", "acquire", "the pipe"), for a message about an
// option given to another.
using CommandsWith = std::function<std::vector<std::string>(const std::string& option)>;

// Looks at the options given to `command` (named `command_name`: "set", or "the pipe" for the
// top-level app) once it is declared, and throws UsageError naming the option and what to write
// instead, for an option of other commands only and one given twice:
//   ratelimit --try ...            --try is an option of exec and acquire, not of the pipe: ...
//   ratelimit --rate 5 --rate 6    --rate given twice ('5', then '6'): give it once
// An option no command declares is left to the parser, which suggests the nearest.
void check_options_of(const CLI::App& command, std::string_view command_name,
                      const std::vector<char*>& arguments, const CommandsWith& commands_with);

}  // namespace ratelimit::cli
