#pragma once

#include <nlohmann/json.hpp>
#include <string>

// JSON output (status --json, --stats=json): nlohmann's objects, fields in the order written.
namespace ratelimit::format {

using Json = nlohmann::ordered_json;

// A number as JSON can carry it: null for infinity or NaN (JSON has neither), a whole number
// without a fraction ("1000", not "1000.0"), else rounded to `decimals` decimals when given.
Json json_number(double value, int decimals = -1);

// Bytes from outside (a key, a record's text) as a JSON string: utf8_text(). nlohmann's dump()
// throws on a string that is not UTF-8, so every string from outside goes through here and the
// output stays valid JSON whatever the bytes.
Json json_text(const std::string& bytes);

}  // namespace ratelimit::format
