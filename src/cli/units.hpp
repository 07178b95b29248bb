#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "errors.hpp"
#include "format/quantities.hpp"

namespace ratelimit::cli {

// What a rate or size was written in: plain units, or an explicit data unit.
enum class DataUnit { unspecified, bytes, bits };

// The rule for both rates and sizes (--rate, --burst, --chunk, every command): k, K, M, G, T are
// powers of 1000 and Ki, Mi, Gi, Ti of 1024; B (byte, bytes) is bytes and bit (bits) bits; "bps"
// and "Bps" are bits and bytes per second. A lone lowercase "b" is refused with a hint, since
// "5kb" is meant as kilobytes as often as kilobits.
struct Rate {
  double units_per_second;  // bits already converted to bytes
  DataUnit unit;
  bool binary_prefix = false;   // written with Ki, Mi, ...: shown back in powers of 1024
  double period_seconds = 0.0;  // the period written ("/15s", "/m", "ps"); 0: none
};

// "5000", "1.5M", "10MiB/s", "8Mbit/s", "8Mbps", "5MiBps", "10MB/sec", "2/s", "100/min",
// "300/15s", "1k/500ms"; "off" (any case) is no limit, an infinite rate.
Rate parse_rate(std::string_view text);
// How `rate` was written, to show rates and amounts of `counted` back alike.
format::Notation notation_of(const Rate& rate, format::Counted counted);

// A --quota: "at most `units` in any window of `period`", e.g. "50GB/d", "5000/h", "300/10m".
struct QuotaAmount {
  double units = 0.0;  // bits already converted to bytes
  std::chrono::nanoseconds period{0};
  DataUnit unit = DataUnit::unspecified;
};
QuotaAmount parse_quota(std::string_view text);

struct Amount {
  double units = 0.0;  // bits already converted to bytes
  DataUnit unit = DataUnit::unspecified;
  bool binary_prefix = false;
};
// "64k", "1MiB", "4096", "0", "8Mbit"; a count of units (bytes, lines or records).
Amount parse_size(std::string_view text);
// Whether `text` is written as a duration ("2s", "500ms", "1min"), not as an amount ("64k").
bool ends_in_time_unit(std::string_view text);
// "500ms", "10s", "2m", "1h", "1d", "1.5s"; a bare number is seconds.
std::chrono::nanoseconds parse_duration(std::string_view text);

// A value written as a time ("2s", "10ms") or as an amount ("64k", "0"), as --burst and --chunk
// take it.
using TimeOrAmount = std::variant<std::chrono::nanoseconds, Amount>;
TimeOrAmount parse_time_or_amount(std::string_view text);

// An option's value as read, with its text as written: only messages that quote the user read
// the text.
template <typename Value>
struct Written {
  Value value{};
  std::string text;
};

// CLI11 checks for a number from `low` to `high` whose message names the value as written, e.g.
// "'abc' is not a whole number from 1 to 256" (CLI11's own Range prints 1.000000 and the like).
CLI::Validator whole_number_in(std::int64_t low, std::int64_t high);
CLI::Validator number_in(double low, double high);

// `parse` as a parser of Written values: what it reads and the text it read.
template <typename Parse>
auto written(Parse parse) {
  return [parse](const std::string& text) { return Written{parse(text), text}; };
}

// A CLI11 check that keeps what `parse` reads of each value given in `value` (added to a vector
// in the order given; else the last one given holds), or reports the parser's own message, e.g.
// "invalid rate '1x': unknown unit 'x'": the value is parsed once, as it is checked.
template <typename Value, typename Parse>
CLI::Validator read_into(Value& value, Parse parse, std::string name) {
  return CLI::Validator(
      [&value, parse](std::string& text) -> std::string {
        try {
          if constexpr (requires { value.push_back(parse(text)); })
            value.push_back(parse(text));
          else
            value = parse(text);
          return {};
        } catch (const UsageError& error) {
          return error.what();
        }
      },
      std::move(name));
}

}  // namespace ratelimit::cli
