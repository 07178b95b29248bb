#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

// A record's check against a torn or damaged write; no I/O.
namespace ratelimit::format {

// FNV-1a of `bytes` in 32 or 64 bits (Hash: std::uint32_t or std::uint64_t): cheap, and it sees
// a byte changed anywhere; no defence against anyone who means harm.
template <typename Hash>
constexpr Hash fnv1a(std::string_view bytes) {
  static_assert(std::is_same_v<Hash, std::uint32_t> || std::is_same_v<Hash, std::uint64_t>);
  constexpr bool wide = std::is_same_v<Hash, std::uint64_t>;
  Hash hash = wide ? Hash(0xcbf29ce484222325ULL) : Hash(2166136261u);
  const Hash prime = wide ? Hash(0x100000001b3ULL) : Hash(16777619u);
  for (const char byte : bytes) {
    hash ^= static_cast<unsigned char>(byte);
    hash *= prime;
  }
  return hash;
}

}  // namespace ratelimit::format
