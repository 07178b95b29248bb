#include "state/key_file_names.hpp"

#include "errors.hpp"

namespace ratelimit::state {
namespace {

bool is_plain_key_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void validate_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyBytes)
    throw UsageError("key '" + std::string(key) + "' must be 1 to " + std::to_string(kMaxKeyBytes) +
                     " bytes long");
}

std::string key_file_stem(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  for (char c : key) {
    if (is_plain_key_byte(c)) {
      encoded += c;
    } else {
      const auto byte = static_cast<unsigned char>(c);
      encoded += '%';
      encoded += kHex[byte >> 4];
      encoded += kHex[byte & 0xF];
    }
  }
  return encoded;
}

std::optional<std::string> key_of_file_stem(std::string_view stem) {
  std::string key;
  for (std::size_t i = 0; i < stem.size(); ++i) {
    if (is_plain_key_byte(stem[i])) {
      key += stem[i];
      continue;
    }
    if (stem[i] != '%' || i + 2 >= stem.size() || hex_value(stem[i + 1]) < 0 ||
        hex_value(stem[i + 2]) < 0)
      return std::nullopt;
    key += static_cast<char>(hex_value(stem[i + 1]) * 16 + hex_value(stem[i + 2]));
    i += 2;
  }
  if (key.empty() || key.size() > kMaxKeyBytes || key_file_stem(key) != stem) return std::nullopt;
  return key;
}

}  // namespace ratelimit::state
