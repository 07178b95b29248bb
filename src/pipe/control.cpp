#include "pipe/control.hpp"

#include <fmt/core.h>

#include <charconv>
#include <cmath>

namespace ratelimit::pipe {

std::string encode(const RateMessage& message) {
  return fmt::format("{} {}\n", message.units_per_second, message.in_bytes ? "bytes" : "units");
}

std::optional<RateMessage> decode_rate_message(std::string_view line) {
  double rate = 0.0;
  const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), rate);
  if (error != std::errc() || !(rate > 0.0) || std::isnan(rate)) return std::nullopt;
  const std::string_view unit(end, static_cast<std::size_t>(line.data() + line.size() - end));
  if (unit == " bytes") return RateMessage{rate, true};
  if (unit == " units") return RateMessage{rate, false};
  return std::nullopt;
}

}  // namespace ratelimit::pipe
