#pragma once

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

}  // namespace ratelimit::cli
