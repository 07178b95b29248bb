#pragma once

#include <algorithm>
#include <string_view>

namespace ratelimit::format {

// The text up to the next `separator` (all of it if there is none), taken with the separator
// from the front of `text`.
inline std::string_view take_field(std::string_view& text, char separator) {
  const std::size_t end = std::min(text.find(separator), text.size());
  const std::string_view field = text.substr(0, end);
  text.remove_prefix(std::min(end + 1, text.size()));
  return field;
}

}  // namespace ratelimit::format
