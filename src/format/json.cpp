#include "format/json.hpp"

#include <cmath>
#include <cstdint>

#include "format/escaping.hpp"

namespace ratelimit::format {

Json json_number(double value, int decimals) {
  if (!std::isfinite(value)) return nullptr;
  if (decimals >= 0) {
    const double scale = std::pow(10.0, decimals);
    const double rounded = std::round(value * scale) / scale;
    if (std::isfinite(rounded)) value = rounded;
  }
  // Below 2^53 every whole double is an exact integer.
  constexpr double kExactIntegers = 9007199254740992.0;
  if (value == std::floor(value) && std::abs(value) < kExactIntegers)
    return static_cast<std::int64_t>(value);
  return value;
}

Json json_text(const std::string& bytes) { return utf8_text(bytes); }

}  // namespace ratelimit::format
