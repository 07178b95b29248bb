// Rates, sizes and durations as a user may type them: every input is a value or a UsageError,
// never another exception, a crash, NaN or a negative amount.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cli/units.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using ratelimit::UsageError;
  try {
    const ratelimit::cli::Rate rate = ratelimit::cli::parse_rate(text);
    if (!(rate.units_per_second > 0.0)) std::abort();
  } catch (const UsageError&) {
  }
  try {
    if (!(ratelimit::cli::parse_size(text) >= 0.0)) std::abort();
  } catch (const UsageError&) {
  }
  try {
    if (ratelimit::cli::parse_duration(text).count() < 0) std::abort();
  } catch (const UsageError&) {
  }
  return 0;
}
