#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "backends/bucket_backend.hpp"
#include "ratelimit/token_bucket.hpp"

// The state-file backend's on-disk format, without I/O: file names and the bucket record.
namespace ratelimit::backends {

// What one state file keeps: the core's parameters and state, and the machine and boot they
// belong to (the state's times are on that machine's CLOCK_MONOTONIC, which restarts at every
// boot).
struct StateRecord {
  BucketParams params;
  BucketState state;
  KeySchedule schedule;
  std::string machine_id;  // /etc/machine-id; empty if the machine has none
  std::string boot_id;
};

// The record's bytes: magic, version, parameters, state, machine id, boot id, the schedule's entry
// and timetable length, the timetable and an FNV-1a checksum of all that, in this machine's byte
// order (a record of another machine is refused before its numbers are used).
std::string encode_record(const StateRecord& record);

struct DecodedRecord {
  std::optional<StateRecord> record;
  std::string problem;  // why there is no record, e.g. "bad checksum"
};
// A record is damaged, as a corrupt one is, when a field is out of what its parameters allow:
// more stored permits than the bucket holds, or a next free moment later than `now` (on the
// record's clock) plus the longest wait one request can book.
DecodedRecord decode_record(std::string_view bytes, std::chrono::nanoseconds now);

// The longest wait one request can book on a bucket of `params`: the most permits a request may
// ask for, each at the slowest interval the bucket charges.
std::chrono::nanoseconds longest_booked_wait(const BucketParams& params);

// Keys are at most this many bytes, so that every file name stays under NAME_MAX.
inline constexpr std::size_t kMaxKeyBytes = 80;
// Throws std::invalid_argument naming the key if it is empty or too long.
void validate_key(std::string_view key);

// The bucket file of `key`: bytes other than ASCII letters, digits, '-' and '_' are written %XX,
// so that no key reaches another path ('/', '.', "..") or another key's name.
std::string bucket_file_name(std::string_view key);
// The key of a bucket file name, or none if `file_name` is not one.
std::optional<std::string> key_of_bucket_file(std::string_view file_name);
// The lock file of slot `index` of `key`'s --max-inflight.
std::string slot_file_name(std::string_view key, int index);

}  // namespace ratelimit::backends
