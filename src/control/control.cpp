#include "control/control.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "format/checksum.hpp"
#include "format/escaping.hpp"
#include "format/fields.hpp"
#include "format/timetable_text.hpp"

namespace ratelimit::control {

namespace {

constexpr std::string_view kTimetableTag = "timetable ";
constexpr std::string_view kStatusTag = "ratelimit-pipe 4";
constexpr std::string_view kCallStatusTag = "ratelimit-call 2";

}  // namespace

std::string encode_rate(const NewRate& rate) {
  if (const auto* timetable = std::get_if<Timetable>(&rate))
    return fmt::format("{}{}\n", kTimetableTag, format::timetable_text(*timetable));
  return fmt::format("{}\n", std::get<double>(rate));
}

std::optional<NewRate> decode_rate(std::string_view line) {
  if (line.starts_with(kTimetableTag)) {
    std::optional<Timetable> timetable =
        format::parse_timetable_text(line.substr(kTimetableTag.size()));
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

template <typename T, typename... Base>
std::optional<T> whole_field(std::string_view field, Base... base) {
  T value{};
  const auto [end, error] =
      std::from_chars(field.data(), field.data() + field.size(), value, base...);
  if (error != std::errc() || end != field.data() + field.size()) return std::nullopt;
  return value;
}

}  // namespace

namespace {

// The counted field of a status record: bytes shown as bits are "bits".
std::string_view counted_field(const format::Notation& notation) {
  if (notation.counted == format::Counted::bytes && notation.bits) return "bits";
  return format::counted_name(notation.counted);
}

std::optional<format::Notation> notation_of_fields(std::string_view counted,
                                                   std::string_view prefixes) {
  if (prefixes != "si" && prefixes != "iec") return std::nullopt;
  format::Notation notation{.binary_prefix = prefixes == "iec"};
  if (counted == "bytes" || counted == "bits") {
    notation.counted = format::Counted::bytes;
    notation.bits = counted == "bits";
  } else if (counted == "lines") {
    notation.counted = format::Counted::lines;
  } else if (counted == "records") {
    notation.counted = format::Counted::records;
  } else {
    return std::nullopt;
  }
  return notation;
}

constexpr std::string_view kNoKey = "-";
constexpr std::string_view kNoTimetable = "-";

std::optional<std::string> key_of_hex(std::string_view hex) {
  if (hex == kNoKey) return std::string();
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  std::string key;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const std::optional<unsigned> byte = whole_field<unsigned>(hex.substr(i, 2), 16);
    if (!byte) return std::nullopt;
    key += static_cast<char>(*byte);
  }
  return key;
}

// The keys' field of a pipe with several keys: "HEX=SECONDS,HEX=SECONDS".
std::string keys_field(const std::vector<KeyHeld>& keys) {
  std::string field;
  for (const KeyHeld& key : keys)
    field += fmt::format("{}{}={}", field.empty() ? "" : ",", format::hex_bytes(key.key),
                         key.held_seconds);
  return field;
}

std::optional<std::vector<KeyHeld>> keys_of_field(std::string_view field) {
  std::vector<KeyHeld> keys;
  while (!field.empty()) {
    const std::string_view entry = format::take_field(field, ',');
    const std::size_t equals = entry.find('=');
    if (equals == entry.npos) return std::nullopt;
    std::optional<std::string> key = key_of_hex(entry.substr(0, equals));
    const std::optional<double> held = whole_field<double>(entry.substr(equals + 1));
    if (!key || key->empty() || !held || !(*held >= 0.0)) return std::nullopt;
    keys.push_back({.key = std::move(*key), .held_seconds = *held});
  }
  if (keys.size() < 2) return std::nullopt;
  return keys;
}

// A record: its fields (its tag first), then their FNV-1a hash, "TAG F1 F2 xxxxxxxx\n".
std::string framed(std::string_view fields) {
  return fmt::format("{} {:08x}\n", fields, format::fnv1a<std::uint32_t>(fields));
}

// The fields after `tag` of a record framed so; nullopt unless it is exactly such a record.
std::optional<std::vector<std::string_view>> unframed(std::string_view record,
                                                      std::string_view tag) {
  constexpr std::size_t kCheckBytes = 1 + 8 + 1;  // " xxxxxxxx\n"
  if (!record.starts_with(tag) || !record.ends_with('\n') ||
      record.size() < tag.size() + kCheckBytes || record[record.size() - kCheckBytes] != ' ')
    return std::nullopt;
  const std::optional<std::uint32_t> check =
      whole_field<std::uint32_t>(record.substr(record.size() - kCheckBytes + 1, 8), 16);
  record.remove_suffix(kCheckBytes);
  // A status file is rewritten in place, so a read may meet a write half done.
  if (!check || *check != format::fnv1a<std::uint32_t>(record)) return std::nullopt;
  record.remove_prefix(tag.size());
  std::vector<std::string_view> fields;
  while (record.starts_with(' ')) {
    record.remove_prefix(1);
    const std::size_t end = std::min(record.find(' '), record.size());
    fields.push_back(record.substr(0, end));
    record.remove_prefix(end);
  }
  if (!record.empty()) return std::nullopt;
  return fields;
}

}  // namespace

std::string encode_status(const PipeStatus& status) {
  std::string fields = fmt::format(
      "{} {} {} {} {} {} {} {} {} {}", kStatusTag, counted_field(status.notation),
      status.notation.binary_prefix ? "iec" : "si", status.rate, status.units, status.bytes,
      status.answered, status.key.empty() ? kNoKey : format::hex_bytes(status.key),
      status.notation.period_seconds, status.timetable.empty() ? kNoTimetable : status.timetable);
  if (status.keys.size() > 1)
    fields += fmt::format(" {} {}", keys_field(status.keys),
                          status.held_by.empty() ? kNoKey : format::hex_bytes(status.held_by));
  return framed(fields);
}

std::optional<PipeStatus> decode_status(std::string_view record) {
  const std::optional<std::vector<std::string_view>> framed_fields = unframed(record, kStatusTag);
  if (!framed_fields) return std::nullopt;
  const std::vector<std::string_view>& fields = *framed_fields;
  // Seven fields from a pipe started before the period and the timetable were published; eleven
  // from a pipe with several keys.
  if (fields.size() != 7 && fields.size() != 9 && fields.size() != 11) return std::nullopt;
  std::optional<format::Notation> notation = notation_of_fields(fields[0], fields[1]);
  std::string timetable;
  std::vector<KeyHeld> keys;
  std::string held_by;
  if (fields.size() == 11) {
    std::optional<std::vector<KeyHeld>> listed = keys_of_field(fields[9]);
    std::optional<std::string> holder = key_of_hex(fields[10]);
    if (!listed || !holder) return std::nullopt;
    keys = std::move(*listed);
    held_by = std::move(*holder);
  }
  if (fields.size() >= 9) {
    const std::optional<double> period = whole_field<double>(fields[7]);
    if (!notation || !period || !(*period >= 0.0) || fields[8].find(' ') != fields[8].npos)
      return std::nullopt;
    notation->period_seconds = *period;
    if (fields[8] != kNoTimetable) timetable = fields[8];
  }
  const std::optional<double> rate = whole_field<double>(fields[2]);
  const std::optional<std::uint64_t> units = whole_field<std::uint64_t>(fields[3]);
  const std::optional<std::uint64_t> bytes = whole_field<std::uint64_t>(fields[4]);
  const std::optional<std::uint64_t> answered = whole_field<std::uint64_t>(fields[5]);
  std::optional<std::string> key = key_of_hex(fields[6]);
  if (!notation || !rate || !(*rate > 0.0) || !units || !bytes || !answered || !key)
    return std::nullopt;
  return PipeStatus{.notation = *notation,
                    .rate = *rate,
                    .units = *units,
                    .bytes = *bytes,
                    .answered = *answered,
                    .key = std::move(*key),
                    .timetable = std::move(timetable),
                    .keys = std::move(keys),
                    .held_by = std::move(held_by)};
}

namespace {

// By CallWait, in its order.
constexpr std::array<std::string_view, 3> kCallWaitNames = {"turn", "slot", "pause"};

}  // namespace

std::string_view call_wait_name(CallWait wait) {
  return kCallWaitNames.at(static_cast<std::size_t>(wait));
}

std::optional<CallWait> call_wait_named(std::string_view name) {
  const auto found = std::find(kCallWaitNames.begin(), kCallWaitNames.end(), name);
  if (found == kCallWaitNames.end()) return std::nullopt;
  return static_cast<CallWait>(found - kCallWaitNames.begin());
}

std::string encode_call_status(const CallStatus& status) {
  return framed(fmt::format("{} {} {} {} {} {}", kCallStatusTag, status.command,
                            call_wait_name(status.waits_for), keys_field(status.keys),
                            status.held_by.empty() ? kNoKey : format::hex_bytes(status.held_by),
                            status.until.count()));
}

std::optional<CallStatus> decode_call_status(std::string_view record) {
  const std::optional<std::vector<std::string_view>> fields = unframed(record, kCallStatusTag);
  if (!fields || fields->size() != 5) return std::nullopt;
  const std::string_view command = (*fields)[0];
  if (command.empty() ||
      !std::all_of(command.begin(), command.end(), [](char c) { return c >= 'a' && c <= 'z'; }))
    return std::nullopt;
  const std::optional<CallWait> waits_for = call_wait_named((*fields)[1]);
  std::optional<std::vector<KeyHeld>> keys = keys_of_field((*fields)[2]);
  std::optional<std::string> held_by = key_of_hex((*fields)[3]);
  const std::optional<std::int64_t> until = whole_field<std::int64_t>((*fields)[4]);
  if (!waits_for || !keys || !held_by || !until) return std::nullopt;
  return CallStatus{.command = std::string(command),
                    .waits_for = *waits_for,
                    .keys = std::move(*keys),
                    .held_by = std::move(*held_by),
                    .until = std::chrono::nanoseconds(*until)};
}

}  // namespace ratelimit::control
