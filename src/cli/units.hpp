#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>

#include "errors.hpp"
#include "format/parse_quantities.hpp"

namespace ratelimit::cli {

// The quantities of format/ that options read, by the names the commands use.
using format::Amount;
using format::DataUnit;
using format::ends_in_time_unit;
using format::notation_of;
using format::parse_duration;
using format::parse_quota;
using format::parse_rate;
using format::parse_size;
using format::parse_time_or_amount;
using format::QuotaAmount;
using format::Rate;
using format::TimeOrAmount;

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

// An option whose values `parse` reads into `value` (read_into()), named `value_name` in --help
// and in its messages.
template <typename Value, typename Parse>
CLI::Option* add_read_option(CLI::App& app, const std::string& name, Value& value, Parse parse,
                             const std::string& value_name, const std::string& help) {
  return app.add_option(name, CLI::callback_t{}, help)
      ->check(read_into(value, parse, value_name))
      ->option_text(value_name);
}

// The same, keeping each value as written (written()).
template <typename Value, typename Parse>
CLI::Option* add_written_option(CLI::App& app, const std::string& name, Value& value, Parse parse,
                                const std::string& value_name, const std::string& help) {
  return add_read_option(app, name, value, written(parse), value_name, help);
}

}  // namespace ratelimit::cli
