#pragma once

#include <string>
#include <string_view>

// Bytes from outside (a key, a record's text) as text that a terminal or JSON can carry.
namespace ratelimit::format {

// Whether `bytes` is UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_utf8(std::string_view bytes);

// `bytes` with control bytes, DEL, backslash and every byte that is not part of a UTF-8
// character written \xNN, so that a terminal shows each byte and the text reads back unchanged.
std::string escaped_bytes(std::string_view bytes);

// `bytes` itself when it is UTF-8, else escaped_bytes(bytes): always valid in a JSON string.
std::string utf8_text(std::string_view bytes);

// Two lowercase hex digits a byte: "61ff62".
std::string hex_bytes(std::string_view bytes);

}  // namespace ratelimit::format
