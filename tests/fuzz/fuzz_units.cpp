// Rates, sizes, durations and timetables as a user may type them: every input is a value or a
// UsageError (or the timetable's invalid_argument), never another exception, a crash, NaN or a
// negative amount.
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "cli/units.hpp"
#include "ratelimit/timetable.hpp"
#include "schedule/timetable_text.hpp"

namespace {

class UtcZone final : public ratelimit::TimeZone {
 public:
  std::chrono::seconds utc_offset(std::chrono::sys_seconds) const override {
    return std::chrono::seconds::zero();
  }
};
const UtcZone kUtc;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using ratelimit::UsageError;
  try {
    const ratelimit::cli::Rate rate = ratelimit::cli::parse_rate(text);
    if (!(rate.units_per_second > 0.0)) std::abort();
  } catch (const UsageError&) {
  }
  try {
    if (!(ratelimit::cli::parse_size(text).units >= 0.0)) std::abort();
  } catch (const UsageError&) {
  }
  try {
    if (ratelimit::cli::parse_duration(text).count() < 0) std::abort();
  } catch (const UsageError&) {
  }
  try {
    const ratelimit::Timetable timetable(ratelimit::schedule::parse_timetable(
        text,
        [](std::string_view rate) { return ratelimit::cli::parse_rate(rate).units_per_second; }));
    const auto period =
        timetable.at(std::chrono::sys_seconds(std::chrono::seconds(1'796'000'000)), kUtc);
    if (!(period.permits_per_second > 0.0)) std::abort();
  } catch (const UsageError&) {
  } catch (const std::invalid_argument&) {
  }
  // A key's timetable (written by anything that can write the key) is read back or refused, and
  // what is read back is written in the same form again.
  if (const std::optional<ratelimit::Timetable> timetable =
          ratelimit::schedule::parse_timetable_text(text)) {
    const std::string written = ratelimit::schedule::timetable_text(*timetable);
    const std::optional<ratelimit::Timetable> again =
        ratelimit::schedule::parse_timetable_text(written);
    if (!again || ratelimit::schedule::timetable_text(*again) != written) std::abort();
  }
  return 0;
}
