#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

// The value of an HTTP Retry-After header (RFC 9110, 10.2.3), as `ratelimit throttle
// --retry-after` takes it.
namespace ratelimit::format {

// How long Retry-After `text` asks to wait: delay-seconds (digits: "30"), or an HTTP-date in
// any of the three forms RFC 9110 (5.6.7) has recipients accept: IMF-fixdate, which every
// server sends now ("Wed, 21 Oct 2026 07:28:00 GMT"), the obsolete RFC 850 form ("Wednesday,
// 21-Oct-26 07:28:00 GMT", its year taken as RFC 9110 says: one that looks more than 50 years
// ahead is in the century before) and ANSI C's asctime() form ("Wed Oct 21 07:28:00 2026"),
// measured from `now_unix_seconds` (a date already past: zero). Blanks around the value are ignored
// (a header line as curl writes it), and nothing but blanks is zero (a response without the header,
// as
// `--retry-after "$(sed ...)"` passes it on). None if `text` is none of these.
std::optional<std::chrono::nanoseconds> retry_after_delay(std::string_view text,
                                                          std::int64_t now_unix_seconds);

}  // namespace ratelimit::format
