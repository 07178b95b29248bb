#include "cli/units.hpp"

#include <fmt/core.h>

#include <charconv>
#include <optional>

namespace ratelimit::cli {
namespace {

// Parses all of `text` as a T, or nothing.
template <typename T>
std::optional<T> whole_text_as(const std::string& text) {
  T value{};
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

template <typename T>
CLI::Validator range_check(T low, T high, std::string_view what) {
  return CLI::Validator(
      [low, high, what](std::string& text) -> std::string {
        const std::optional<T> value = whole_text_as<T>(text);
        if (value && *value >= low && *value <= high) return {};
        return fmt::format("'{}' is not {} from {} to {}", text, what, low, high);
      },
      fmt::format("{}..{}", low, high));
}

}  // namespace

CLI::Validator whole_number_in(std::int64_t low, std::int64_t high) {
  return range_check(low, high, "a whole number");
}

CLI::Validator number_in(double low, double high) { return range_check(low, high, "a number"); }

}  // namespace ratelimit::cli
