#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stores/bucket_store.hpp"
#include "stores/redis/redis_connection.hpp"

// What redis_bucket.lua takes and gives back, apart from the connection that carries it: requests
// encoded as the script's ARGV, replies decoded into the store's values, each a pure function that
// needs no server. Positions are the script's own, counted from 1 as Lua counts ARGV and a reply
// table, and named as in redis_bucket.lua's header: both sides use these names.
namespace ratelimit::stores::redis {

// ARGV positions. Every operation's (kArgTime: but batch's):
inline constexpr std::size_t kArgOperation = 1;  // "reserve", "reserve_keeping", "status", ...
inline constexpr std::size_t kArgTime = 2;       // Unix microseconds (tests), "" for TIME

// reserve and reserve_keeping: then the shape's own parameters, each quota's pair, and last (an odd
// one out after the pairs) the notation, only with the parameters reserve applies.
inline constexpr std::size_t kArgPermits = 3;
// Nanoseconds, the int64 maximum for none; then kQuotaWaitRefused with
// PermitRequest::refuse_quota_wait.
inline constexpr std::size_t kArgTimeout = 4;
inline constexpr std::string_view kQuotaWaitRefused = " quota";
inline constexpr std::size_t kArgTexts = 5;  // the caller's texts, as the key keeps them
inline constexpr std::size_t kArgShape = 6;
inline constexpr std::size_t kArgPayFirst = 7;
inline constexpr std::size_t kArgRate = 8;
inline constexpr std::size_t kArgBurst = 9;              // bursty
inline constexpr std::size_t kArgWarmup = 9;             // warming_up
inline constexpr std::size_t kArgCold = 10;              // warming_up
inline constexpr std::size_t kArgFirstQuotaBursty = 10;  // LIMIT then SLOT_US, per quota
inline constexpr std::size_t kArgFirstQuotaWarmingUp = 11;

// give_back:
inline constexpr std::size_t kArgGivenBack = 3;
inline constexpr std::size_t kArgBookedFrom = 4;  // optional, with kArgBookedUntil
inline constexpr std::size_t kArgBookedUntil = 5;

// set_rate:
inline constexpr std::size_t kArgNewRate = 3;
inline constexpr std::size_t kArgNewTimetable = 4;
inline constexpr std::size_t kArgNewEntryUntil = 5;
inline constexpr std::size_t kArgNewSettings = 6;  // optional, as kArgTexts

// throttle (kThrottleOperation): a report of "too many" (ThrottleRequest), nanoseconds each.
inline constexpr std::string_view kThrottleOperation = "throttle";
inline constexpr std::size_t kArgSentBefore = 3;
inline constexpr std::size_t kArgRetryAfter = 4;  // "0": none

// reserve's reply, when the key holds the request's rate and timetable and nothing was discarded:
// the wait text alone if granted ("WAIT FROM UNTIL", the booking's span after the wait), else a
// table of kAsRequestedFields; otherwise one of kKeptFields, or of kReplacedFields when the
// request replaced the key's parameters (their fields then hold the ones replaced) or is told that
// it follows the key's settings (the key's settings). A wait that a quota set ends in " quota".
inline constexpr std::size_t kReplyGranted = 1;  // integer 0 or 1
inline constexpr std::size_t kReplyWait = 2;     // "WAIT", or granted "WAIT FROM UNTIL"
inline constexpr std::size_t kAsRequestedFields = 2;
// Integer 0, 1 (the request replaced the key's parameters), kReplyFollowedTold or kReplyFollowed
// (the request, which keeps them, asked for other settings and follows the key's; told: its
// caller says so).
inline constexpr std::size_t kReplyReplaced = 3;
inline constexpr std::int64_t kReplyFollowedTold = 2;
inline constexpr std::int64_t kReplyFollowed = 3;
inline constexpr std::size_t kReplyProblem = 4;       // why the record was discarded, "" if not
inline constexpr std::size_t kReplyKeyTimetable = 5;  // after the call
inline constexpr std::size_t kReplyKeyRate = 6;       // after the call
inline constexpr std::size_t kKeptFields = 6;
inline constexpr std::size_t kReplyReplacedParams = 7;  // kParamFields, as status gives them
inline constexpr std::size_t kParamFields = 7;
inline constexpr std::size_t kReplyReplacedTimetable = kReplyReplacedParams + kParamFields;
inline constexpr std::size_t kReplyReplacedQuotas = kReplyReplacedTimetable + 1;  // as `quotas`
inline constexpr std::size_t kReplacedFields = kReplyReplacedQuotas;

// A bucket's parameters in a reply, as offsets from their first position: shape, rate, burst,
// warm-up nanoseconds, cold factor, start full and pay first ("0" or "1").
inline constexpr std::size_t kParamShape = 0;
inline constexpr std::size_t kParamRate = 1;
inline constexpr std::size_t kParamBurst = 2;
inline constexpr std::size_t kParamWarmup = 3;
inline constexpr std::size_t kParamCold = 4;
inline constexpr std::size_t kParamStartFull = 5;
inline constexpr std::size_t kParamPayFirst = 6;

// status's reply: nil without a bucket; {"unusable", why} (kUnusableFields) for a record that
// cannot be used; else the bucket's kStatusFields, then kQuotaFields for each quota.
inline constexpr std::size_t kUnusableFields = 2;
inline constexpr std::size_t kStatusParams = 1;  // kParamFields
inline constexpr std::size_t kStatusStored = kStatusParams + kParamFields;
inline constexpr std::size_t kStatusNextFreeIn = kStatusStored + 1;  // nanoseconds
inline constexpr std::size_t kStatusTimetable = kStatusNextFreeIn + 1;
inline constexpr std::size_t kStatusEntryUntil = kStatusTimetable + 1;
inline constexpr std::size_t kStatusNotation = kStatusEntryUntil + 1;  // "" for none
// "" for a key never throttled; else the rate in force, the pause left (nanoseconds), the
// throttles and the time since the last one (nanoseconds), joined by blanks.
inline constexpr std::size_t kStatusBackoff = kStatusNotation + 1;
inline constexpr std::size_t kStatusFields = kStatusBackoff;
// Each quota's fields, as offsets from its first:
inline constexpr std::size_t kQuotaLimit = 0;
inline constexpr std::size_t kQuotaPeriod = 1;      // nanoseconds
inline constexpr std::size_t kQuotaUsed = 2;        // in the window a request now counts against
inline constexpr std::size_t kQuotaNextFreeIn = 3;  // nanoseconds until one more unit may go
inline constexpr std::size_t kQuotaFields = 4;

// A reserve's wait on a key ever throttled ends in kWaitBackoff and the pause left then, in
// nanoseconds (Reservation::paused_for, backing_off).
inline constexpr std::string_view kWaitBackoff = " backoff ";

// throttle's reply: nil without a bucket, else kThrottleFields: a new event (0 or 1), the pause
// extended (0 or 1), the pause left (nanoseconds) and the rate in force after the report.
inline constexpr std::size_t kThrottleNewEvent = 1;
inline constexpr std::size_t kThrottlePauseExtended = 2;
inline constexpr std::size_t kThrottlePausedFor = 3;
inline constexpr std::size_t kThrottleRateInForce = 4;
inline constexpr std::size_t kThrottleFields = kThrottleRateInForce;

// give_back's reply: nil without a bucket, else 1 if the next free moment moved, 0 if not.
// set_rate's: nil without a bucket, else 1.

// batch: several requests on the key in one call, each served as if alone, in order. After
// kArgOperation, each request's ARGV as it would go alone, after the count of its arguments. Its
// reply: a table of each request's own reply (an error among them is that request's alone).
inline constexpr std::string_view kBatchOperation = "batch";

// reserve_all: several keys decided together (decide_all() of stores/multi_key.hpp), over
// KEYS[1..n]. After kArgOperation and kArgTime, kAllArgTimeout (the call's, as kArgTimeout), then
// each key's reserve or reserve_keeping ARGV as it would go alone, after the count of its
// arguments. Its reply: kAllGranted (integer 0 or 1), kAllWait (the longest wait, nanoseconds),
// kAllHeldBy (integer: the key whose wait it is, from 1; 0: none waited), then each key's reply
// to its settings and wait (as reserve's, refused), then, granted, each key's reply to its booking
// (as reserve's).
inline constexpr std::string_view kReserveAllOperation = "reserve_all";
inline constexpr std::size_t kAllArgTimeout = 3;
inline constexpr std::size_t kAllGranted = 1;
inline constexpr std::size_t kAllWait = 2;
inline constexpr std::size_t kAllHeldBy = 3;
inline constexpr std::size_t kAllFirstKeyReply = 4;

// The ARGV of a reserve (reserve_keeping when the request keeps the key's parameters: it follows
// them) of permits
// due within `timeout` (nanoseconds::max(): no limit), at `now_micros` (Unix microseconds; none:
// the server's TIME).
std::vector<std::string> encode_reserve(const PermitRequest& request,
                                        std::chrono::nanoseconds timeout,
                                        std::optional<std::int64_t> now_micros);
std::vector<std::string> encode_status(std::optional<std::int64_t> now_micros);
std::vector<std::string> encode_throttle(const ThrottleRequest& request,
                                         std::optional<std::int64_t> now_micros);
std::vector<std::string> encode_give_back(std::int64_t permits,
                                          const std::optional<BookingSpan>& booked,
                                          std::optional<std::int64_t> now_micros);
// With `settings`, all of them (RateChange::settings).
std::vector<std::string> encode_set_rate(double permits_per_second, const KeySchedule& schedule,
                                         std::optional<std::int64_t> now_micros,
                                         const std::optional<KeySettings>& settings = {});

// A decoded reserve reply: the reservation, and why the key's record was discarded ("" if not).
struct DecodedReservation {
  Reservation reservation;
  std::string problem;
};

// Decoders of the replies to the requests above. A reply they cannot read throws
// StoreUnavailable, "<server>: unexpected reply to the bucket script's <operation>: <what>", one
// line (`server` names the store, as "Redis at URL"). `request`: the one the reply answers.
DecodedReservation decode_reservation(const Value& reply, const PermitRequest& request,
                                      std::string_view server);
// Nothing without a bucket; `key` is the status's key.
std::optional<BucketStatus> decode_status(const Value& reply, const std::string& key,
                                          std::string_view server);
// Whether the next free moment moved (false without a bucket).
bool decode_give_back(const Value& reply, std::string_view server);
// Nothing without a bucket.
std::optional<ThrottleResult> decode_throttle(const Value& reply, std::string_view server);
// False without a bucket.
bool decode_set_rate(const Value& reply, std::string_view server);

// The ARGV of a reserve_all of `requests` (distinct keys, one deadline) due within `timeout`.
std::vector<std::string> encode_reserve_all(const std::vector<PermitRequest>& requests,
                                            std::chrono::nanoseconds timeout,
                                            std::optional<std::int64_t> now_micros);
// A decoded reserve_all reply, and why each key's record was discarded ("" if not).
struct DecodedKeysReservation {
  KeysReservation reservation;
  std::vector<std::string> problems;
};
DecodedKeysReservation decode_reservations(const Value& reply,
                                           const std::vector<PermitRequest>& requests,
                                           std::string_view server);

// The call of the bucket script's function (FCALL) on `redis_keys` (KEYS) with `arguments` (ARGV,
// an encode_*'s). The store sends it, directly or through the agent, which relays it unchanged.
std::vector<std::string> script_call(const std::vector<std::string>& redis_keys,
                                     const std::vector<std::string>& arguments);
// Whether `reply` says that the server has no such function (a server started again without
// persistence, a new Cluster node): the call did not run, and runs once library_load() has.
bool function_missing(const Value& reply);
// FUNCTION LOAD REPLACE of the script's library: what the store sends after function_missing().
std::vector<std::string> library_load();

// Whether `command` may be sent again when its reply was lost (it may have run): not a call of
// the script that gives permits back or sets a rate, which would count twice. The one source of
// this for the direct path and the agent alike (RetryPolicy::sending).
bool may_send_again(const std::vector<std::string>& command);

// Adds a request's ARGV (as it would go alone) to a batch's, which starts with kBatchOperation.
void add_to_batch(std::vector<std::string>& batch, std::span<const std::string> request);
// The replies of a batch of `count` requests, each request's own: a whole-call error (no function,
// BUSY, ...: nothing ran) is each request's reply. Any other reply but a table of `count` throws
// StoreUnavailable as the decoders above do.
std::vector<Value> decode_batch(Value reply, std::size_t count, std::string_view server);

}  // namespace ratelimit::stores::redis
