#include "control/control.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>

#include "schedule/timetable_text.hpp"

namespace ratelimit::pipe {

namespace {

constexpr std::string_view kTimetableTag = "timetable ";
constexpr std::string_view kStatusTag = "ratelimit-pipe 2";

}  // namespace

std::string encode_rate(const NewRate& rate) {
  if (const auto* timetable = std::get_if<Timetable>(&rate))
    return fmt::format("{}{}\n", kTimetableTag, schedule::timetable_text(*timetable));
  return fmt::format("{}\n", std::get<double>(rate));
}

std::optional<NewRate> decode_rate(std::string_view line) {
  if (line.starts_with(kTimetableTag)) {
    std::optional<Timetable> timetable =
        schedule::parse_timetable_text(line.substr(kTimetableTag.size()));
    if (!timetable) return std::nullopt;
    return NewRate(std::move(*timetable));
  }
  double rate = 0.0;
  const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), rate);
  if (error != std::errc() || end != line.data() + line.size() || !(rate > 0.0))
    return std::nullopt;
  return NewRate(rate);
}

namespace {

template <typename T>
std::optional<T> whole_field(std::string_view field) {
  T value{};
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (error != std::errc() || end != field.data() + field.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string encode_status(const PipeStatus& status) {
  return fmt::format("{} {} {} {} {} {}\n", kStatusTag, status.counts_bytes ? "bytes" : "records",
                     status.rate, status.units, status.bytes, status.answered);
}

std::optional<PipeStatus> decode_status(std::string_view record) {
  if (!record.starts_with(kStatusTag) || !record.ends_with('\n')) return std::nullopt;
  record.remove_prefix(kStatusTag.size());
  record.remove_suffix(1);
  std::vector<std::string_view> fields;
  while (record.starts_with(' ')) {
    record.remove_prefix(1);
    const std::size_t end = std::min(record.find(' '), record.size());
    fields.push_back(record.substr(0, end));
    record.remove_prefix(end);
  }
  if (!record.empty() || fields.size() != 5) return std::nullopt;
  if (fields[0] != "bytes" && fields[0] != "records") return std::nullopt;
  const std::optional<double> rate = whole_field<double>(fields[1]);
  const std::optional<std::uint64_t> units = whole_field<std::uint64_t>(fields[2]);
  const std::optional<std::uint64_t> bytes = whole_field<std::uint64_t>(fields[3]);
  const std::optional<std::uint64_t> answered = whole_field<std::uint64_t>(fields[4]);
  if (!rate || !(*rate > 0.0) || !units || !bytes || !answered) return std::nullopt;
  return PipeStatus{.counts_bytes = fields[0] == "bytes",
                    .rate = *rate,
                    .units = *units,
                    .bytes = *bytes,
                    .answered = *answered};
}

}  // namespace ratelimit::pipe
