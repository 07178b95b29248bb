#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Words the user meant: the hints of "did you mean ...?"; no I/O.
namespace ratelimit::format {

// The word of `candidates` that `word` is most likely a typo of (at most two edits away, and
// fewer edits than the word is long), for "did you mean ...?".
std::optional<std::string> nearest_word(std::string_view word,
                                        const std::vector<std::string>& candidates);

// Why `text` is none of `choices` (lower-case words; `text` in any case): "invalid value 'lcoal':
// expected fail, allow or local; did you mean 'local'?".
std::string not_one_of(std::string_view text, const std::vector<std::string>& choices);

}  // namespace ratelimit::format
