#include "stores/state_file/state_file_format.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <stdexcept>

#include "exec/inflight_slots.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::stores::state_file {
namespace {

using namespace std::chrono_literals;

// When records are read: a little after the sample's next free moment.
constexpr std::chrono::nanoseconds kNow = 200s;

StateRecord sample_record() {
  StateRecord record;
  record.params.shape = BucketShape::warming_up;
  record.params.permits_per_second = 2.5;
  record.params.warmup = 10s;
  record.params.cold_factor = 4.0;
  record.state.stored_permits = 3.25;
  record.state.next_free = 123'456'789'012ns;
  record.machine_id = "3d1219c7c4c5404aaa1f6d2a48adfda4";
  record.boot_id = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
  record.schedule = {.timetable = "Mon-08:00,512000;18:00,off", .entry_until = 1'796'000'000};
  record.notation = "bytes iec 60 units";
  return record;
}

TEST(StateRecord, KeepsQuotas) {
  StateRecord record = sample_record();
  Quota hourly({.limit = 5000, .period = 1h}, kNow);
  hourly.book(7, kNow);
  record.quotas = {hourly, Quota({.limit = 3, .period = 2s}, kNow)};
  const DecodedRecord decoded = decode_record(encode_record(record), kNow);
  ASSERT_TRUE(decoded.record) << decoded.problem;
  ASSERT_EQ(decoded.record->quotas.size(), 2u);
  EXPECT_EQ(decoded.record->quotas[0].params(), hourly.params());
  EXPECT_EQ(decoded.record->quotas[0].state(), hourly.state());
  EXPECT_EQ(decoded.record->quotas[1].params().limit, 3);
}

// FNV-1a, as the records' checksum.
std::uint64_t checksum_of(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// The record of `record` as an older version wrote it: the current one less its last
// `dropped_bytes` before the checksum, under `version`.
std::string older_record(const StateRecord& record, std::size_t dropped_bytes,
                         std::uint32_t version) {
  std::string bytes = encode_record(record);
  bytes.resize(bytes.size() - sizeof(std::uint64_t) - dropped_bytes);
  bytes.replace(8, sizeof version, reinterpret_cast<const char*>(&version), sizeof version);
  const std::uint64_t checksum = checksum_of(bytes);
  bytes.append(reinterpret_cast<const char*>(&checksum), sizeof checksum);
  return bytes;
}

TEST(StateRecord, ReadsARecordOfVersion4AsOneWithoutQuotas) {
  // A record without quotas or notation less its count of quotas and the notation's length is
  // what version 4 wrote.
  StateRecord record = sample_record();
  record.notation.clear();
  const DecodedRecord decoded = decode_record(
      older_record(record, 2 * sizeof(std::uint32_t) + sizeof(std::uint64_t), 4), kNow);
  ASSERT_TRUE(decoded.record) << decoded.problem;
  EXPECT_EQ(decoded.record->params, sample_record().params);
  EXPECT_TRUE(decoded.record->quotas.empty());
}

TEST(StateRecord, ReadsARecordOfVersion5AsOneWithoutNotation) {
  // A record without notation less the notation's length is what version 5 wrote.
  StateRecord record = sample_record();
  record.notation.clear();
  record.quotas = {Quota({.limit = 3, .period = 2s}, kNow)};
  const DecodedRecord decoded = decode_record(
      older_record(record, sizeof(std::uint32_t) + sizeof(std::uint64_t) + sizeof(std::int64_t), 5),
      kNow);
  ASSERT_TRUE(decoded.record) << decoded.problem;
  EXPECT_EQ(decoded.record->params, sample_record().params);
  ASSERT_EQ(decoded.record->quotas.size(), 1u);
  EXPECT_EQ(decoded.record->quotas[0].params().limit, 3);
  EXPECT_EQ(decoded.record->notation, "");
}

TEST(StateRecord, ReadsARecordOfVersion6AsOneWithNoneTold) {
  // A record less the fingerprint of the settings last told is what version 6 wrote.
  StateRecord record = sample_record();
  record.noticed = 42;
  const DecodedRecord decoded = decode_record(older_record(record, sizeof(std::uint64_t), 6), kNow);
  ASSERT_TRUE(decoded.record) << decoded.problem;
  EXPECT_EQ(decoded.record->notation, sample_record().notation);
  EXPECT_EQ(decoded.record->noticed, 0u);
  record.noticed = 42;
  const DecodedRecord current = decode_record(encode_record(record), kNow);
  ASSERT_TRUE(current.record) << current.problem;
  EXPECT_EQ(current.record->noticed, 42u);
}

TEST(StateRecord, ReadsARecordOfVersion7AsOneWithNonePassed) {
  // A record less each quota's passed count is what version 7 wrote.
  StateRecord record = sample_record();
  Quota hourly({.limit = 5000, .period = 1h}, kNow);
  hourly.book(7, kNow);
  hourly.book(3, kNow + 2h, kNow);  // ahead: the 7 are passed
  ASSERT_EQ(hourly.state().passed, 7);
  record.quotas = {hourly};
  record.noticed = 42;
  const DecodedRecord decoded = decode_record(older_record(record, sizeof(std::int64_t), 7), kNow);
  ASSERT_TRUE(decoded.record) << decoded.problem;
  EXPECT_EQ(decoded.record->noticed, 42u);
  ASSERT_EQ(decoded.record->quotas.size(), 1u);
  EXPECT_EQ(decoded.record->quotas[0].state().counts, hourly.state().counts);
  EXPECT_EQ(decoded.record->quotas[0].state().passed, 0);
  const DecodedRecord current = decode_record(encode_record(record), kNow);
  ASSERT_TRUE(current.record) << current.problem;
  EXPECT_EQ(current.record->quotas[0].state(), hourly.state());
}

TEST(StateRecord, AKeyNeverThrottledIsWrittenAsVersion8) {
  const std::string bytes = encode_record(sample_record());
  std::uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  EXPECT_EQ(version, 8u);
  // Version 8 as it was: the passed counts last (none here), before the checksum.
  StateRecord record = sample_record();
  record.noticed = 42;
  const std::string with_fingerprint = encode_record(record);
  EXPECT_EQ(with_fingerprint.size(), bytes.size());
}

TEST(StateRecord, AThrottledKeyKeepsItsBackoffAsVersion9) {
  StateRecord record = sample_record();
  record.backoff = {.paused_until = 150s,
                    .event_at = 120s,
                    .rate_before_cut = 2.5,
                    .throttles = 3,
                    .last_throttle = 121s};
  const std::string bytes = encode_record(record);
  std::uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  EXPECT_EQ(version, 9u);
  EXPECT_EQ(bytes.size(), encode_record(sample_record()).size() + 5 * 8);
  const DecodedRecord decoded = decode_record(bytes, kNow);
  ASSERT_TRUE(decoded.record) << decoded.problem;
  EXPECT_EQ(decoded.record->backoff, record.backoff);
  EXPECT_EQ(decoded.record->params, record.params);
}

TEST(StateRecord, AVersion9RecordWithoutThrottlesIsDamage) {
  StateRecord record = sample_record();
  record.backoff.throttles = 1;
  std::string bytes = encode_record(record);
  // Throttles are the fourth of the five back-off fields, before the checksum.
  const std::int64_t none = 0;
  bytes.replace(bytes.size() - 8 - 2 * 8, 8, reinterpret_cast<const char*>(&none), 8);
  bytes.resize(bytes.size() - 8);
  const std::uint64_t checksum = checksum_of(bytes);
  bytes.append(reinterpret_cast<const char*>(&checksum), sizeof checksum);
  EXPECT_EQ(decode_record(bytes, kNow).problem, "invalid back-off: 0 throttles, rate 0");
}

TEST(StateRecord, KeepsNotationsUpToTheirLimit) {
  StateRecord record = sample_record();
  record.notation = std::string(64, 'n');
  const DecodedRecord longest = decode_record(encode_record(record), kNow);
  ASSERT_TRUE(longest.record) << longest.problem;
  EXPECT_EQ(longest.record->notation, record.notation);
  // A longer one is cut when written, and one claiming more is refused when read.
  record.notation += 'n';
  const DecodedRecord cut = decode_record(encode_record(record), kNow);
  ASSERT_TRUE(cut.record) << cut.problem;
  EXPECT_EQ(cut.record->notation, std::string(64, 'n'));
  std::string bytes = encode_record(sample_record());
  const std::size_t length_at = bytes.size() - 2 * sizeof(std::uint64_t) -
                                sample_record().notation.size() - sizeof(std::uint32_t);
  const std::uint32_t claimed = 65;
  bytes.replace(length_at, sizeof claimed, reinterpret_cast<const char*>(&claimed), sizeof claimed);
  const DecodedRecord too_long = decode_record(bytes, kNow);
  EXPECT_FALSE(too_long.record);
  EXPECT_EQ(too_long.problem, "notation of 65 bytes, at most 64");
}

TEST(StateRecord, RoundTrips) {
  const StateRecord record = sample_record();
  const DecodedRecord decoded = decode_record(encode_record(record), kNow);
  ASSERT_TRUE(decoded.record) << decoded.problem;
  EXPECT_EQ(decoded.record->params, record.params);
  EXPECT_EQ(decoded.record->state, record.state);
  EXPECT_EQ(decoded.record->machine_id, record.machine_id);
  EXPECT_EQ(decoded.record->boot_id, record.boot_id);
  EXPECT_EQ(decoded.record->schedule, record.schedule);
  EXPECT_EQ(decoded.record->notation, record.notation);
}

TEST(StateRecord, KeepsTimetablesUpToTheirLimit) {
  StateRecord record = sample_record();
  record.schedule = {};
  ASSERT_TRUE(decode_record(encode_record(record), kNow).record);
  record.schedule.timetable = std::string(kMaxTimetableBytes, ';');
  const DecodedRecord longest = decode_record(encode_record(record), kNow);
  ASSERT_TRUE(longest.record) << longest.problem;
  EXPECT_EQ(longest.record->schedule, record.schedule);
  record.schedule.timetable += ';';
  const DecodedRecord too_long = decode_record(encode_record(record), kNow);
  EXPECT_FALSE(too_long.record);
  EXPECT_NE(too_long.problem.find("bytes"), std::string::npos) << too_long.problem;
}

TEST(StateRecord, KeepsStartFullAndPayFirst) {
  for (const auto& [start_full, pay_first] : {std::pair{true, false}, std::pair{false, true}}) {
    StateRecord record = sample_record();
    record.params.shape = BucketShape::bursty;
    record.params.start_full = start_full;
    record.params.pay_first = pay_first;
    record.state.stored_permits = 2.5;  // a full burst
    const DecodedRecord decoded = decode_record(encode_record(record), kNow);
    ASSERT_TRUE(decoded.record) << decoded.problem;
    EXPECT_EQ(decoded.record->params, record.params);
  }
}

// A version 1 record (before the flags): magic, version, shape, four doubles, two 64-bit
// integers, the boot id and a checksum, 108 bytes. It counts as a fresh bucket, with the reason.
TEST(StateRecord, AnOlderVersionIsNamed) {
  std::string version_1 = "RLBUCKET";
  const std::uint32_t version = 1;
  version_1.append(reinterpret_cast<const char*>(&version), sizeof version);
  version_1.resize(108, '\0');
  const DecodedRecord decoded = decode_record(version_1, kNow);
  EXPECT_FALSE(decoded.record);
  EXPECT_EQ(decoded.problem, "record version 1, expected 9");
}

TEST(StateRecord, AnyFlippedBitIsDetected) {
  const std::string bytes = encode_record(sample_record());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      EXPECT_FALSE(decode_record(damaged, kNow).record) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(StateRecord, TruncatedOrExtendedIsRejected) {
  const std::string bytes = encode_record(sample_record());
  for (std::size_t size = 0; size < bytes.size(); ++size)
    EXPECT_FALSE(decode_record(bytes.substr(0, size), kNow).record) << size;
  const DecodedRecord extended = decode_record(bytes + "x", kNow);
  EXPECT_FALSE(extended.record);
  EXPECT_NE(extended.problem.find("bytes"), std::string::npos) << extended.problem;
}

TEST(StateRecord, InvalidBucketWithGoodChecksumIsRejected) {
  StateRecord record = sample_record();
  record.params.permits_per_second = -1.0;
  const DecodedRecord decoded = decode_record(encode_record(record), kNow);
  EXPECT_FALSE(decoded.record);
  EXPECT_NE(decoded.problem.find("rate must be positive"), std::string::npos) << decoded.problem;
}

// A record within its checksum is still bounded by its parameters: a damaged one counts as a fresh
// bucket, whatever wrote it.
TEST(StateRecord, StoredPermitsAboveTheMaximumAreDamage) {
  StateRecord record = sample_record();
  record.params = {.shape = BucketShape::bursty, .permits_per_second = 10.0};
  for (const double stored : {1e300, 10.5, std::numeric_limits<double>::infinity()}) {
    record.state.stored_permits = stored;
    const DecodedRecord decoded = decode_record(encode_record(record), kNow);
    EXPECT_FALSE(decoded.record) << stored;
    EXPECT_NE(decoded.problem.find("stored permits"), std::string::npos) << decoded.problem;
  }
  record.state.stored_permits = 10.0;  // a full burst
  EXPECT_TRUE(decode_record(encode_record(record), kNow).record);
  // An infinite rate stores infinitely many.
  record.params.permits_per_second = std::numeric_limits<double>::infinity();
  record.state.stored_permits = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(decode_record(encode_record(record), kNow).record);
}

TEST(StateRecord, ANextFreeMomentBeyondTheLongestBookingIsDamage) {
  StateRecord record = sample_record();
  record.params = {.shape = BucketShape::bursty, .permits_per_second = 1e12};
  record.state.stored_permits = 0.0;
  const std::chrono::nanoseconds longest = longest_booked_wait(record.params);
  // 2^63 - 1 permits at 1 ps each: 107 days.
  EXPECT_GT(longest, 9'223'000s);
  EXPECT_LT(longest, 9'224'000s);
  record.state.next_free = kNow + longest;
  EXPECT_TRUE(decode_record(encode_record(record), kNow).record);
  record.state.next_free += 1ns;
  const DecodedRecord decoded = decode_record(encode_record(record), kNow);
  EXPECT_FALSE(decoded.record);
  EXPECT_NE(decoded.problem.find("next free moment"), std::string::npos) << decoded.problem;
  // Slower buckets can be booked up to the end of time.
  record.params.permits_per_second = 1.0;
  record.state.next_free = std::chrono::nanoseconds::max();
  EXPECT_TRUE(decode_record(encode_record(record), kNow).record);
  // Without a limit nothing is ever booked ahead.
  record.params.permits_per_second = std::numeric_limits<double>::infinity();
  record.state.next_free = kNow + 1ns;
  EXPECT_FALSE(decode_record(encode_record(record), kNow).record);
}

TEST(KeyNames, StayInsideTheDirectory) {
  EXPECT_EQ(bucket_file_name("api"), "api.bucket");
  EXPECT_EQ(bucket_file_name("../etc/passwd"), "%2E%2E%2Fetc%2Fpasswd.bucket");
  EXPECT_EQ(bucket_file_name("."), "%2E.bucket");
  EXPECT_EQ(bucket_file_name("a.slot-0"), "a%2Eslot-0.bucket");
  EXPECT_EQ(exec::slot_file_name("a/b", 3), "a%2Fb.slot-3");
}

TEST(KeyNames, EveryByteRoundTrips) {
  for (int byte = 0; byte < 256; ++byte) {
    const std::string key = std::string("k") + static_cast<char>(byte);
    const std::string name = bucket_file_name(key);
    EXPECT_EQ(name.find('/'), std::string::npos);
    EXPECT_EQ(key_of_bucket_file(name), key) << byte;
  }
}

TEST(KeyNames, OtherFilesAreNotBuckets) {
  EXPECT_EQ(key_of_bucket_file("api.slot-0"), std::nullopt);
  EXPECT_EQ(key_of_bucket_file(".bucket"), std::nullopt);
  EXPECT_EQ(key_of_bucket_file("a%2.bucket"), std::nullopt);
  EXPECT_EQ(key_of_bucket_file("a%2f.bucket"), std::nullopt);  // not the canonical spelling
  EXPECT_EQ(key_of_bucket_file("a%41.bucket"), std::nullopt);  // 'A' needs no escape
  EXPECT_EQ(key_of_bucket_file("."), std::nullopt);
}

TEST(KeyNames, LengthIsBounded) {
  EXPECT_THROW(state::validate_key(""), UsageError);
  EXPECT_THROW(state::validate_key(std::string(state::kMaxKeyBytes + 1, 'k')), UsageError);
  EXPECT_NO_THROW(state::validate_key(std::string(state::kMaxKeyBytes, 'k')));
  // The longest name, every byte escaped, still fits in NAME_MAX (255).
  EXPECT_LE(exec::slot_file_name(std::string(state::kMaxKeyBytes, '/'), 255).size(), 255u);
}

}  // namespace
}  // namespace ratelimit::stores::state_file
