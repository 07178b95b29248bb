#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/backoff.hpp"
#include "ratelimit/token_bucket.hpp"
#include "state/key_file_names.hpp"
#include "stores/bucket_store.hpp"

// The state-file store's on-disk format, without I/O: file names and the bucket record.
namespace ratelimit::stores::state_file {

// What one state file keeps: the core's parameters and state, and the machine and boot they
// belong to (the state's times are on that machine's CLOCK_MONOTONIC, which restarts at every
// boot).
struct StateRecord {
  BucketParams params;
  BucketState state;
  KeySchedule schedule;
  std::vector<Quota> quotas;
  std::string notation;       // PermitRequest::notation as the key keeps it; empty: none
  std::uint64_t noticed = 0;  // notice_followed()'s record of the request last told
  BackoffState backoff{};     // throttles 0: never throttled
  std::string machine_id;     // /etc/machine-id; empty if the machine has none
  std::string boot_id;
};

// The record's bytes: magic, version, parameters, state, machine id, boot id, the schedule's entry
// and timetable length, the timetable, the quotas (their number, then each one's limit, period,
// newest slot and kQuotaCounts counts), the notation's length and the notation, the fingerprint of
// the settings last told that they follow the key's, each quota's passed count (QuotaState), for
// a key ever throttled (version 9) its back-off (the pause's end, the event's start, the rate
// before the cut, the number of throttles, the last one's time), and an FNV-1a checksum of all
// that, in this machine's byte order (a record of another machine is refused before its numbers
// are used). A key never throttled is written as version 8, without the back-off. A record of
// version 7 (before the passed counts) is read with none passed, of version 6 (before the
// fingerprint) as one with none told, of version 5
// (before the notation) as one without a notation either, of version 4 (before quotas) as one
// without quotas either.
std::string encode_record(const StateRecord& record);

// The largest record decode_record() takes (the longest timetable, the most quotas, the longest
// notation): a state file is read up to this size, so that every record written is read whole.
extern const std::size_t kMaxRecordBytes;

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

// The bucket file of `key`: its state::key_file_stem() and ".bucket".
std::string bucket_file_name(std::string_view key);
// The key of a bucket file name, or none if `file_name` is not one.
std::optional<std::string> key_of_bucket_file(std::string_view file_name);

}  // namespace ratelimit::stores::state_file
