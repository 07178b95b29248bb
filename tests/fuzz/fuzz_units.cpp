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
#include <vector>

#include "errors.hpp"
#include "format/parse_quantities.hpp"
#include "format/timetable_text.hpp"
#include "ratelimit/timetable.hpp"

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
    const ratelimit::format::Rate rate = ratelimit::format::parse_rate(text);
    if (!(rate.units_per_second > 0.0)) std::abort();
  } catch (const UsageError&) {
  }
  try {
    if (!(ratelimit::format::parse_size(text).units >= 0.0)) std::abort();
  } catch (const UsageError&) {
  }
  try {
    if (ratelimit::format::parse_duration(text).count() < 0) std::abort();
  } catch (const UsageError&) {
  }
  try {
    std::vector<ratelimit::TimetableEntry> entries;
    for (const auto& written : ratelimit::format::parse_timetable(text))
      entries.push_back(written.entry);
    const ratelimit::Timetable timetable(entries);
    const auto period =
        timetable.at(std::chrono::sys_seconds(std::chrono::seconds(1'796'000'000)), kUtc);
    if (!(period.permits_per_second > 0.0)) std::abort();
  } catch (const UsageError&) {
  } catch (const std::invalid_argument&) {
  }
  // A key's timetable (written by anything that can write the key) is read back or refused, and
  // what is read back is written in the same form again.
  if (const std::optional<ratelimit::Timetable> timetable =
          ratelimit::format::parse_timetable_text(text)) {
    const std::string written = ratelimit::format::timetable_text(*timetable);
    const std::optional<ratelimit::Timetable> again =
        ratelimit::format::parse_timetable_text(written);
    if (!again || ratelimit::format::timetable_text(*again) != written) std::abort();
  }
  return 0;
}
