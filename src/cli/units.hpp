#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "errors.hpp"

namespace ratelimit::cli {

// What a rate or size was written in: plain units, or an explicit data unit.
enum class DataUnit { unspecified, bytes, bits };

struct Rate {
  double units_per_second;  // bits already converted to bytes
  DataUnit unit;
};

// "5000", "1.5M", "10MiB/s", "8Mbit/s", "2/s", "100/m", "300/15s", "1k/500ms".
Rate parse_rate(std::string_view text);
// "64k", "1MiB", "4096", "0"; a count of units (bytes, lines or records).
double parse_size(std::string_view text);
// "500ms", "10s", "2m", "1h", "1d", "1.5s"; a bare number is seconds.
std::chrono::nanoseconds parse_duration(std::string_view text);

// CLI11 checks for a number from `low` to `high` whose message names the value as written, e.g.
// "'abc' is not a whole number from 1 to 256" (CLI11's own Range prints 1.000000 and the like).
CLI::Validator whole_number_in(std::int64_t low, std::int64_t high);
CLI::Validator number_in(double low, double high);

// A CLI11 check that reports the parser's own message, e.g. "invalid rate '1x': unknown unit 'x'".
template <typename Parse>
CLI::Validator syntax_check(Parse parse, std::string name) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          parse(text);
          return {};
        } catch (const UsageError& error) {
          return error.what();
        }
      },
      std::move(name));
}

}  // namespace ratelimit::cli
