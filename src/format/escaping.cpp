#include "format/escaping.hpp"

#include <fmt/core.h>

namespace ratelimit::format {
namespace {

bool is_continuation(unsigned char byte) { return (byte & 0xc0) == 0x80; }

// The length of the UTF-8 character at the start of `bytes`, 0 if there is none.
std::size_t character_length(std::string_view bytes) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  // The second byte's range excludes overlong forms (E0, F0), surrogates (ED) and code points
  // past U+10FFFF (F4).
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (bytes.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (!is_continuation(byte(i))) return 0;
  }
  return length;
}

}  // namespace

bool is_utf8(std::string_view bytes) {
  while (!bytes.empty()) {
    const std::size_t length = character_length(bytes);
    if (length == 0) return false;
    bytes.remove_prefix(length);
  }
  return true;
}

std::string escaped_bytes(std::string_view bytes) {
  std::string shown;
  while (!bytes.empty()) {
    const auto byte = static_cast<unsigned char>(bytes[0]);
    const std::size_t length = character_length(bytes);
    if (length == 0 || byte < 0x20 || byte == 0x7f || byte == '\\') {
      shown += fmt::format("\\x{:02x}", byte);
      bytes.remove_prefix(1);
    } else {
      shown += bytes.substr(0, length);
      bytes.remove_prefix(length);
    }
  }
  return shown;
}

std::string utf8_text(std::string_view bytes) {
  return is_utf8(bytes) ? std::string(bytes) : escaped_bytes(bytes);
}

std::string hex_bytes(std::string_view bytes) {
  std::string hex;
  for (const char c : bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return hex;
}

}  // namespace ratelimit::format
