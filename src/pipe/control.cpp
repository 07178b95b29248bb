#include "pipe/control.hpp"

#include <fmt/core.h>

#include <charconv>

namespace ratelimit::pipe {

std::string encode_rate(double units_per_second) { return fmt::format("{}\n", units_per_second); }

std::optional<double> decode_rate(std::string_view line) {
  double rate = 0.0;
  const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), rate);
  if (error != std::errc() || end != line.data() + line.size() || !(rate > 0.0))
    return std::nullopt;
  return rate;
}

}  // namespace ratelimit::pipe
