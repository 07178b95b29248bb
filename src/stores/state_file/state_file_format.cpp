#include "stores/state_file/state_file_format.hpp"

#include <fmt/core.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "format/checksum.hpp"

namespace ratelimit::stores::state_file {
namespace {

constexpr std::string_view kMagic = "RLBUCKET";
// 2 added the flags (start_full, pay_first), 3 the machine id, 4 the schedule, 5 the quotas, 6
// the notation, 7 the fingerprint of the settings last told, 8 each quota's passed count (after
// the fingerprint), 9 the back-off (after the passed counts). A record of version 4 to 8 is read
// as one without what came later; of another version it counts as a fresh bucket, as a corrupt
// one does. A key never throttled is still written as version 8, without the back-off.
constexpr std::uint32_t kVersion = 9;
constexpr std::uint32_t kVersionWithoutBackoff = 8;
// The oldest version read; each later one is a step of kVersionSteps below.
constexpr std::uint32_t kOldestVersion = 4;
// A notation is a few words (format::notation_text()).
constexpr std::uint32_t kMaxNotationBytes = 64;
// Limit, period, newest slot and the counts.
constexpr std::size_t kQuotaRecordBytes = (3 + kQuotaCounts) * sizeof(std::int64_t);
constexpr std::uint32_t kMaxRecordQuotas = 64;
constexpr std::uint32_t kStartFull = 1;
constexpr std::uint32_t kPayFirst = 2;
constexpr std::size_t kMachineIdBytes = 32;  // 128 bits in hex, as machine-id(5)
constexpr std::size_t kBootIdBytes = 36;     // a UUID as the kernel prints it
constexpr std::string_view kBucketSuffix = ".bucket";
// Pause end, event start, rate before the cut, throttles, last throttle.
constexpr std::size_t kBackoffRecordBytes = 4 * sizeof(std::int64_t) + sizeof(double);

template <typename Value>
void append(std::string& out, Value value) {
  char bytes[sizeof value];
  std::memcpy(bytes, &value, sizeof value);
  out.append(bytes, sizeof value);
}

// Reads fixed-size fields in order; the caller has checked the total size.
class FieldReader {
 public:
  explicit FieldReader(std::string_view bytes) : bytes_(bytes) {}
  template <typename Value>
  Value next() {
    Value value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof value);
    offset_ += sizeof value;
    return value;
  }
  std::string_view next_bytes(std::size_t count) {
    const std::string_view field = bytes_.substr(offset_, count);
    offset_ += count;
    return field;
  }

 private:
  std::string_view bytes_;
  std::size_t offset_ = 0;
};

// Without the timetable, which follows the fixed fields.
constexpr std::size_t kFixedRecordBytes = kMagic.size() + 4 * sizeof(std::uint32_t) +
                                          4 * sizeof(double) + 3 * sizeof(std::int64_t) +
                                          kMachineIdBytes + kBootIdBytes + sizeof(std::uint64_t);
// The timetable's length is the last fixed field before the timetable and its checksum.
constexpr std::size_t kTimetableLengthOffset =
    kFixedRecordBytes - sizeof(std::uint64_t) - sizeof(std::uint32_t);

// Text fields are fixed-size, padded with blanks.
std::string padded(std::string text, std::size_t size) {
  text.resize(size, ' ');
  return text;
}

std::string unpadded(std::string_view field) {
  return std::string(field.substr(0, field.find_last_not_of(' ') + 1));
}

}  // namespace

const std::size_t kMaxRecordBytes = kFixedRecordBytes + kMaxTimetableBytes + sizeof(std::uint32_t) +
                                    kMaxRecordQuotas * kQuotaRecordBytes + sizeof(std::uint32_t) +
                                    kMaxNotationBytes + sizeof(StateRecord::noticed) +
                                    kMaxRecordQuotas * sizeof(std::int64_t) + kBackoffRecordBytes;

std::string encode_record(const StateRecord& record) {
  std::string out(kMagic);
  const bool throttled = record.backoff.throttles > 0;
  append(out, throttled ? kVersion : kVersionWithoutBackoff);
  append(out, static_cast<std::uint32_t>(record.params.shape));
  append(out, record.params.permits_per_second);
  append(out, record.params.max_burst_seconds);
  append(out, static_cast<std::int64_t>(record.params.warmup.count()));
  append(out, record.params.cold_factor);
  append(out,
         (record.params.start_full ? kStartFull : 0) | (record.params.pay_first ? kPayFirst : 0));
  append(out, record.state.stored_permits);
  append(out, static_cast<std::int64_t>(record.state.next_free.count()));
  out += padded(record.machine_id, kMachineIdBytes);
  out += padded(record.boot_id, kBootIdBytes);
  append(out, static_cast<std::int64_t>(record.schedule.entry_until));
  append(out, static_cast<std::uint32_t>(record.schedule.timetable.size()));
  out += record.schedule.timetable;
  append(out, static_cast<std::uint32_t>(record.quotas.size()));
  for (const Quota& quota : record.quotas) {
    append(out, static_cast<std::int64_t>(quota.params().limit));
    append(out, static_cast<std::int64_t>(quota.params().period.count()));
    append(out, static_cast<std::int64_t>(quota.state().newest_slot));
    for (const std::int64_t count : quota.state().counts) append(out, count);
  }
  // Cut rather than refused: the notation only changes how `status` shows the key.
  const std::string_view notation = std::string_view(record.notation).substr(0, kMaxNotationBytes);
  append(out, static_cast<std::uint32_t>(notation.size()));
  out += notation;
  append(out, record.noticed);
  for (const Quota& quota : record.quotas) append(out, quota.state().passed);
  if (throttled) {
    append(out, static_cast<std::int64_t>(record.backoff.paused_until.count()));
    append(out, static_cast<std::int64_t>(record.backoff.event_at.count()));
    append(out, record.backoff.rate_before_cut);
    append(out, record.backoff.throttles);
    append(out, static_cast<std::int64_t>(record.backoff.last_throttle.count()));
  }
  append(out, format::fnv1a<std::uint64_t>(out));
  return out;
}

std::chrono::nanoseconds longest_booked_wait(const BucketParams& params) {
  const double slowest_interval_ns =
      1e9 / params.permits_per_second *
      (params.shape == BucketShape::warming_up ? params.cold_factor : 1.0);
  const double wait_ns =
      slowest_interval_ns * static_cast<double>(std::numeric_limits<std::int64_t>::max());
  // 2^63: the first double that no longer fits in nanoseconds.
  if (!(wait_ns < 9223372036854775808.0)) return std::chrono::nanoseconds::max();
  return std::chrono::nanoseconds(static_cast<std::int64_t>(wait_ns));
}

namespace {

// Why bytes are no record ("bad checksum"); none when they are one so far.
using Problem = std::optional<std::string>;

// What the sections read so far make of a record: its size with them (and the checksum), and
// its number of quotas.
struct Layout {
  std::size_t size = kFixedRecordBytes;
  std::uint32_t quotas = 0;
};

// The length at the end of the sections read so far (just before the checksum); 0 if the bytes
// end before `end`.
std::uint32_t length_at(std::string_view bytes, std::size_t offset, std::size_t end) {
  std::uint32_t length = 0;
  if (bytes.size() >= end) std::memcpy(&length, bytes.data() + offset, sizeof length);
  return length;
}

// One step per version after 4, in order: the section that version added after the last, its
// size (from the lengths it holds, each read where it lies, so that a torn or extended record is
// named as such; a length beyond what a record may hold is a problem) and its fields. A record of
// version V is read through the steps up to V's; what the later ones add keeps StateRecord's
// values for a record without it (no quotas, no notation, none told, none passed, never
// throttled), so that what reads the record sees the current version only.
struct VersionStep {
  std::uint32_t version;
  Problem (*measure)(std::string_view bytes, Layout& layout);
  // May throw std::invalid_argument (a quota no Quota holds).
  Problem (*read)(FieldReader& reader, Layout& layout, StateRecord& record);
};

constexpr std::array<VersionStep, 5> kVersionSteps{{
    // 5: the quotas, their number first.
    {5,
     [](std::string_view bytes, Layout& layout) -> Problem {
       layout.quotas = length_at(bytes, layout.size - sizeof(std::uint64_t),
                                 layout.size + sizeof(std::uint32_t));
       if (layout.quotas > kMaxRecordQuotas)
         return "record of " + std::to_string(layout.quotas) + " quotas, at most " +
                std::to_string(kMaxRecordQuotas);
       layout.size += sizeof(std::uint32_t) + layout.quotas * kQuotaRecordBytes;
       return std::nullopt;
     },
     [](FieldReader& reader, Layout& layout, StateRecord& record) -> Problem {
       layout.quotas = reader.next<std::uint32_t>();
       for (std::uint32_t i = 0; i < layout.quotas; ++i) {
         QuotaParams params;
         params.limit = reader.next<std::int64_t>();
         params.period = std::chrono::nanoseconds(reader.next<std::int64_t>());
         QuotaState state;
         state.newest_slot = reader.next<std::int64_t>();
         for (std::int64_t& count : state.counts) count = reader.next<std::int64_t>();
         record.quotas.emplace_back(params, state);  // validates them
       }
       return std::nullopt;
     }},
    // 6: the notation, its length first.
    {6,
     [](std::string_view bytes, Layout& layout) -> Problem {
       const std::size_t offset = layout.size - sizeof(std::uint64_t);
       const std::uint32_t notation_bytes =
           length_at(bytes, offset, offset + sizeof(std::uint32_t));
       if (notation_bytes > kMaxNotationBytes)
         return "notation of " + std::to_string(notation_bytes) + " bytes, at most " +
                std::to_string(kMaxNotationBytes);
       layout.size += sizeof(std::uint32_t) + notation_bytes;
       return std::nullopt;
     },
     [](FieldReader& reader, Layout&, StateRecord& record) -> Problem {
       record.notation = std::string(reader.next_bytes(reader.next<std::uint32_t>()));
       return std::nullopt;
     }},
    // 7: the fingerprint of the settings last told.
    {7,
     [](std::string_view, Layout& layout) -> Problem {
       layout.size += sizeof(StateRecord::noticed);
       return std::nullopt;
     },
     [](FieldReader& reader, Layout&, StateRecord& record) -> Problem {
       record.noticed = reader.next<std::uint64_t>();
       return std::nullopt;
     }},
    // 8: each quota's passed count.
    {8,
     [](std::string_view, Layout& layout) -> Problem {
       layout.size += layout.quotas * sizeof(std::int64_t);
       return std::nullopt;
     },
     [](FieldReader& reader, Layout&, StateRecord& record) -> Problem {
       for (Quota& quota : record.quotas) {
         QuotaState state = quota.state();
         state.passed = reader.next<std::int64_t>();
         quota = Quota(quota.params(), state);  // validates it
       }
       return std::nullopt;
     }},
    // 9: the back-off, on a key ever throttled (a key never throttled is written as version 8).
    {9,
     [](std::string_view, Layout& layout) -> Problem {
       layout.size += kBackoffRecordBytes;
       return std::nullopt;
     },
     [](FieldReader& reader, Layout&, StateRecord& record) -> Problem {
       record.backoff.paused_until = std::chrono::nanoseconds(reader.next<std::int64_t>());
       record.backoff.event_at = std::chrono::nanoseconds(reader.next<std::int64_t>());
       record.backoff.rate_before_cut = reader.next<double>();
       record.backoff.throttles = reader.next<std::int64_t>();
       record.backoff.last_throttle = std::chrono::nanoseconds(reader.next<std::int64_t>());
       if (record.backoff.throttles < 1 || !(record.backoff.rate_before_cut >= 0.0))
         return "invalid back-off: " + std::to_string(record.backoff.throttles) +
                " throttles, rate " + fmt::format("{:g}", record.backoff.rate_before_cut);
       return std::nullopt;
     }},
}};
static_assert(kVersionSteps.back().version == kVersion);

// The version the record says it is, first, so that a record of another size from another
// version is named as such: kVersion where the bytes do not begin with the magic (the size or the
// magic is then found wrong).
Problem read_version(std::string_view bytes, std::uint32_t& version) {
  version = kVersion;
  if (bytes.size() < kMagic.size() + sizeof(std::uint32_t) || !bytes.starts_with(kMagic))
    return std::nullopt;
  std::memcpy(&version, bytes.data() + kMagic.size(), sizeof version);
  if (version >= kOldestVersion && version <= kVersion) return std::nullopt;
  return "record version " + std::to_string(version) + ", expected " + std::to_string(kVersion);
}

// The size that the lengths a record of `version` holds give it (the timetable's, then each
// step's up to `version`). Fewer bytes than the fixed fields: their size.
Problem read_expected_size(std::string_view bytes, std::uint32_t version, std::size_t& size) {
  size = kFixedRecordBytes;
  if (bytes.size() < kFixedRecordBytes) return std::nullopt;
  const std::uint32_t timetable_bytes = length_at(bytes, kTimetableLengthOffset, kFixedRecordBytes);
  if (timetable_bytes > kMaxTimetableBytes)
    return "timetable of " + std::to_string(timetable_bytes) + " bytes, at most " +
           std::to_string(kMaxTimetableBytes);
  Layout layout{.size = kFixedRecordBytes + timetable_bytes};
  for (const VersionStep& step : kVersionSteps) {
    if (step.version > version) break;
    if (Problem problem = step.measure(bytes, layout)) return problem;
  }
  size = layout.size;
  return std::nullopt;
}

// The magic and the checksum of a record of the right size.
Problem check_integrity(std::string_view bytes) {
  if (bytes.substr(0, kMagic.size()) != kMagic) return "bad magic";
  const auto payload = bytes.substr(0, bytes.size() - sizeof(std::uint64_t));
  std::uint64_t checksum;
  std::memcpy(&checksum, bytes.data() + payload.size(), sizeof checksum);
  if (checksum != format::fnv1a<std::uint64_t>(payload)) return "bad checksum";
  return std::nullopt;
}

// The fields of an intact record of `version` into `record`: version 4's, then each step's up to
// `version`; a value no bucket holds is a problem.
Problem read_fields(std::string_view bytes, std::uint32_t version, StateRecord& record) {
  FieldReader reader(bytes);
  reader.next_bytes(kMagic.size());
  reader.next<std::uint32_t>();  // the version, read already
  const auto shape = reader.next<std::uint32_t>();
  if (shape > static_cast<std::uint32_t>(BucketShape::warming_up))
    return "unknown bucket shape " + std::to_string(shape);
  record.params.shape = static_cast<BucketShape>(shape);
  record.params.permits_per_second = reader.next<double>();
  record.params.max_burst_seconds = reader.next<double>();
  record.params.warmup = std::chrono::nanoseconds(reader.next<std::int64_t>());
  record.params.cold_factor = reader.next<double>();
  const auto flags = reader.next<std::uint32_t>();
  if ((flags & ~(kStartFull | kPayFirst)) != 0) return "unknown flags " + std::to_string(flags);
  record.params.start_full = (flags & kStartFull) != 0;
  record.params.pay_first = (flags & kPayFirst) != 0;
  record.state.stored_permits = reader.next<double>();
  record.state.next_free = std::chrono::nanoseconds(reader.next<std::int64_t>());
  record.machine_id = unpadded(reader.next_bytes(kMachineIdBytes));
  record.boot_id = unpadded(reader.next_bytes(kBootIdBytes));
  record.schedule.entry_until = reader.next<std::int64_t>();
  record.schedule.timetable = std::string(reader.next_bytes(reader.next<std::uint32_t>()));
  Layout layout;
  for (const VersionStep& step : kVersionSteps) {
    if (step.version > version) break;
    try {
      if (Problem problem = step.read(reader, layout, record)) return problem;
    } catch (const std::invalid_argument& error) {
      return std::string("invalid bucket: ") + error.what();
    }
  }
  return std::nullopt;
}

// What the parameters allow of the state at `now` (on the record's clock): the core's checks, at
// most as many stored permits as the bucket holds, and a next free moment no later than the
// longest wait one request can book.
Problem check_state(const StateRecord& record, std::chrono::nanoseconds now) {
  try {
    const TokenBucket bucket{record.params, record.state};  // validates parameters and state
    // Stored permits are rescaled with every change of rate: a rounding above the maximum is no
    // damage.
    if (!(record.state.stored_permits <= bucket.max_permits() * (1.0 + 1e-9)))
      return fmt::format("stored permits {:g} above the bucket's {:g}", record.state.stored_permits,
                         bucket.max_permits());
  } catch (const std::invalid_argument& error) {
    return std::string("invalid bucket: ") + error.what();
  }
  const std::chrono::nanoseconds longest = longest_booked_wait(record.params);
  if (now < std::chrono::nanoseconds::max() - longest && record.state.next_free > now + longest)
    return fmt::format(
        "next free moment {} s ahead, beyond the longest wait a request can book ({} s)",
        (record.state.next_free - now).count() / 1'000'000'000, longest.count() / 1'000'000'000);
  return std::nullopt;
}

}  // namespace

DecodedRecord decode_record(std::string_view bytes, std::chrono::nanoseconds now) {
  const auto damaged = [](std::string problem) {
    return DecodedRecord{.record = {}, .problem = std::move(problem)};
  };
  std::uint32_t version = kVersion;
  if (Problem problem = read_version(bytes, version)) return damaged(std::move(*problem));
  std::size_t expected_size = 0;
  if (Problem problem = read_expected_size(bytes, version, expected_size))
    return damaged(std::move(*problem));
  if (bytes.size() != expected_size)
    return damaged("record of " + std::to_string(bytes.size()) + " bytes, expected " +
                   std::to_string(expected_size));
  if (Problem problem = check_integrity(bytes)) return damaged(std::move(*problem));
  StateRecord record;
  if (Problem problem = read_fields(bytes, version, record)) return damaged(std::move(*problem));
  if (Problem problem = check_state(record, now)) return damaged(std::move(*problem));
  return {.record = std::move(record), .problem = {}};
}

std::string bucket_file_name(std::string_view key) {
  return state::key_file_stem(key) + std::string(kBucketSuffix);
}

std::optional<std::string> key_of_bucket_file(std::string_view file_name) {
  if (!file_name.ends_with(kBucketSuffix)) return std::nullopt;
  return state::key_of_file_stem(file_name.substr(0, file_name.size() - kBucketSuffix.size()));
}

}  // namespace ratelimit::stores::state_file
