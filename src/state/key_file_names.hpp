#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

// How a bucket's key becomes part of a file name in the state directory, without I/O: the
// state-file store names its bucket files so, the --max-inflight slots their lock files.
namespace ratelimit::state {

// Keys are at most this many bytes, so that every file name stays under NAME_MAX.
inline constexpr std::size_t kMaxKeyBytes = 80;
// Throws UsageError naming the key if it is empty or too long. The command line checks each key
// once, as it reads it (--key, or exec's command name): the rooms below take keys so checked.
void validate_key(std::string_view key);

// `key` (one validate_key() accepts) with bytes other than ASCII letters, digits, '-' and '_'
// written %XX, so that no key reaches another path ('/', '.', "..") or another key's name.
std::string key_file_stem(std::string_view key);
// The key that key_file_stem() turns into `stem`, or none if no key does.
std::optional<std::string> key_of_file_stem(std::string_view stem);

}  // namespace ratelimit::state
