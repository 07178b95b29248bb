#pragma once

#include <string_view>

// The prefixes of amounts, which format/ both reads and writes.
namespace ratelimit::format {

struct Prefix {
  std::string_view symbol;
  double factor;
};

// SI (powers of 1000) and IEC (powers of 1024) prefixes as ratelimit writes them, none first.
inline constexpr Prefix kSiPrefixes[] = {
    {"", 1.0}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}};
inline constexpr Prefix kBinaryPrefixes[] = {
    {"", 1.0}, {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0}};

}  // namespace ratelimit::format
