#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

// The value of an HTTP Retry-After header (RFC 9110, 10.2.3), as `ratelimit throttle
// --retry-after` takes it.
namespace ratelimit::format {

// How long Retry-After `text` asks to wait: delay-seconds (digits: "30"), or an HTTP-date in the
// IMF-fixdate form every server sends ("Wed, 21 Oct 2026 07:28:00 GMT"), measured from
// `now_unix_seconds` (a date already past: zero). Blanks around the value are ignored (a header
// line as curl writes it), and nothing but blanks is zero (a response without the header, as
// `--retry-after "$(sed ...)"` passes it on). None if `text` is none of these.
std::optional<std::chrono::nanoseconds> retry_after_delay(std::string_view text,
                                                          std::int64_t now_unix_seconds);

}  // namespace ratelimit::format
