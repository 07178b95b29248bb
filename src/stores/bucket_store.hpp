#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/waiter.hpp"
#include "ratelimit/backoff.hpp"
#include "ratelimit/quota.hpp"
#include "ratelimit/token_bucket.hpp"

// The contract of a store of shared buckets (docs/architecture.md, "Shared buckets"): the state
// file on one host, Redis across hosts. Every store reaches the same decisions on the same state,
// through decide(), and passes tests/golden_vectors.txt.
namespace ratelimit::stores {

// The timetable a key follows, kept with its bucket so that every user of the key follows the
// same entries. The store only compares and keeps it: the users, who know the local time, work
// out which entry is in force and say so in their requests.
struct KeySchedule {
  // As format::timetable_text() writes it; empty: one rate, no timetable.
  std::string timetable;
  // When the entry that set the bucket's rate ends (Unix seconds): the later an entry, the later
  // its end, so a larger value is a later entry.
  std::int64_t entry_until = 0;

  friend bool operator==(const KeySchedule&, const KeySchedule&) = default;
};

// Timetables are at most this many bytes as a key keeps them: a record stays one small write, and
// `ratelimit set` sends one to a pipe in one atomic write (under PIPE_BUF, 4096 bytes).
inline constexpr std::size_t kMaxTimetableBytes = 4000;

// What a key keeps for all its users: its bucket's parameters, timetable and quotas.
struct KeySettings {
  BucketParams params;
  std::string timetable;  // empty: none
  std::vector<QuotaParams> quotas{};
};

// Permits wanted from a named bucket that other processes share.
struct PermitRequest {
  std::string key;
  // The bucket is made with these parameters if it does not exist yet.
  BucketParams params;
  // True: `params` replace the bucket's from now on when they differ, as set_rate does (stored
  // permits rescaled). False: the bucket's parameters are kept (the key owns them: what every
  // user's request does), and a request whose parameters, timetable or quotas differ from the
  // key's follows the key's (Reservation::followed).
  bool apply_params = true;
  // The timetable that params.permits_per_second comes from, and its entry. With apply_params and
  // another timetable than the key's, it replaces the key's. With the key's own timetable and a
  // later entry than the key's, the key moves on to that entry's rate (the first user past a
  // change moves the key on), whatever apply_params says; an earlier entry changes nothing.
  KeySchedule schedule{};
  // The key's quotas, applied as `params` are (apply_params): they replace the key's when they
  // differ.
  std::vector<QuotaParams> quotas{};
  // How the caller wrote its rate (format::notation_text(); empty: not said), for `status` to show
  // the key's rates alike. The key keeps it when a request that applies its parameters makes the
  // key or replaces the key's parameters; one that finds them already the key's leaves the key's
  // notation as it is, and one that replaces them without a notation leaves none.
  std::string notation{};
  std::int64_t permits = 1;
  // On the waiter's timeline (monotonic_now()): granted only if the permits are due by then
  // (Guava tryAcquire); the store's own waits (a lock, a round trip) count against it, and a call
  // that cannot get its answer by then is refused. A deadline already past never waits for the
  // store. nanoseconds::max(): no limit.
  std::chrono::nanoseconds deadline = std::chrono::nanoseconds::max();
  // Refused all the same when a quota, not the rate, holds the permits back past now (a pipe's
  // --stop-at-quota): a turn its user will not wait for books nothing.
  bool refuse_quota_wait = false;
};

// Where a booking lies among the key's: the key's next free moment that it found, and the one it
// left, on the store's own timeline (a state file's monotonic clock, the Redis server's Unix
// time), in nanoseconds. Only handed back to the store that made them (give_back), never read as
// times.
struct BookingSpan {
  std::int64_t from = 0;
  std::int64_t until = 0;

  friend bool operator==(const BookingSpan&, const BookingSpan&) = default;
};

// A new rate and timetable for every user of a key from now on.
struct RateChange {
  std::string key;
  double permits_per_second = 0.0;
  KeySchedule schedule{};
  // `ratelimit set --key`: all the key's settings from now on (their rate permits_per_second,
  // their timetable schedule's), the parameters changed as change_rate() changes a rate, the
  // quotas as a request's replace them; a key without a bucket is made with them. None: only the
  // rate and timetable change, and only on a key that has a bucket.
  std::optional<KeySettings> settings{};
};

// Permits that reserve() booked and their user did not use (a pipe's chunk booked ahead when its
// input ended), on their way back to the key.
struct UnusedPermits {
  std::string key;
  std::int64_t permits = 0;
  // The span of the user's latest bookings that they come from (give_back()); none: back in any
  // case (a rate set by hand gives back the key's own turn).
  std::optional<BookingSpan> booked{};
};

struct Reservation {
  bool granted = false;
  // How long until the permits may be used; when refused, how long that would have been (zero
  // when the store could not be asked in time). Its caller counts it from the answer: the state
  // file counts out the time its save took after deciding; Redis's is as of its script's run (the
  // way back is not known apart from the way there).
  std::chrono::nanoseconds wait{0};
  // The wait is a quota's, not the rate's.
  bool held_by_quota = false;
  // Not granted because a stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) cut the call short: that
  // signal.
  int signal = 0;
  // The bucket's parameters that this request replaced (apply_params, and they or the timetable
  // differed), and the timetable they came with.
  std::optional<BucketParams> replaced_params{};
  std::string replaced_timetable{};
  std::vector<QuotaParams> replaced_quotas{};
  // The key's settings, which this request (apply_params false) followed though its own differ.
  std::optional<KeySettings> followed{};
  // Whether its caller says so: only the first request with its settings since the key's
  // settings changed or since a request with other settings was told (notice_followed()), so that
  // a loop is told once.
  bool tell_followed = false;
  // The key's timetable and rate after the request: a user that keeps the key's parameters
  // follows them.
  std::string key_timetable{};
  double key_permits_per_second = 0.0;
  // Granted: where the booking lies among the key's.
  BookingSpan booked{};
  // How long the key was still paused (backing off) when the request was decided: the wait
  // includes it.
  std::chrono::nanoseconds paused_for{0};
  // The key was ever throttled: a pause reported while the caller waits for its turn voids the
  // turn (BucketStore::pause_left()).
  bool backing_off = false;
};

// A user of a key was told "too many" (HTTP 429, SlowDown...): every user of the key backs off
// (include/ratelimit/backoff.hpp).
struct ThrottleRequest {
  std::string key;
  // How long before the report the throttled request was sent: relative, as every time that
  // leaves the process.
  std::chrono::nanoseconds sent_before{0};
  // The service's Retry-After, capped by the reporter; zero: none.
  std::chrono::nanoseconds retry_after{0};
};

struct ThrottleResult {
  ThrottleOutcome outcome;
  // The key after the report.
  std::chrono::nanoseconds paused_for{0};
  double rate_in_force = 0.0;
};

// The most keys one call may name (BucketStore::reserve_all).
inline constexpr std::size_t kMaxKeysPerCall = 16;

// The answer to several keys asked at once (BucketStore::reserve_all): all or nothing.
struct KeysReservation {
  // The call's: granted only if every key grants, at the latest of the keys' moments (`wait`, the
  // longest any key asks); refused (or cut short by `signal`), nothing is booked on any key.
  // held_by_quota: the wait of the key that held the call is a quota's.
  Reservation call;
  // Each key's, in the order asked: the settings it followed or replaced, its own wait (before
  // the others'), and where its booking lies (give_back()).
  std::vector<Reservation> keys{};
  // The key (index into `keys`) whose moment was the latest, when the call had to wait for one
  // (granted or not); none when every key granted at once.
  std::optional<std::size_t> held_by{};
};

// One quota of a key as `ratelimit status` shows it, as of now.
struct QuotaStatus {
  QuotaParams params;
  std::int64_t used = 0;  // in the window that a request now is counted against
  // Until one more unit may be granted (zero: now).
  std::chrono::nanoseconds next_free_in{0};
};

// One bucket as `ratelimit status` shows it, as of now.
struct BucketStatus {
  std::string key;
  // Why the record cannot be used (it then counts as a fresh bucket); empty when it can.
  std::string problem;
  BucketParams params;
  KeySchedule schedule{};
  double stored_permits = 0.0;
  std::chrono::nanoseconds next_free_in{0};
  std::vector<QuotaStatus> quotas{};
  std::string notation{};  // PermitRequest::notation, as the key keeps it; empty: none
  // Backing off: the rate requests are decided at (params' rate when not backing off), how long
  // the key stays paused, how many throttles were reported and how long ago the last one was.
  double rate_in_force = 0.0;
  std::chrono::nanoseconds paused_for{0};
  std::int64_t throttles = 0;
  std::chrono::nanoseconds last_throttle_ago{0};
};

// Checks the requests of one call of reserve_all(); throws UsageError naming what is wrong: no
// request, more than kMaxKeysPerCall, a key named twice (its lock would wait for itself), or
// requests whose deadlines differ.
void check_keys_of_call(const std::vector<PermitRequest>& requests);

// Where shared buckets are kept. A store that cannot answer throws StoreUnavailable (exit 69);
// a bucket that must not be used (another machine's record, an unsafe file) UnsafeStateError (77).
class BucketStore {
 public:
  virtual ~BucketStore() = default;
  // Atomically applies the request's parameters (if asked) and books its permits if they are
  // due by its deadline. Waits only through `waiter`, so a stop signal ends the call at once.
  virtual Reservation reserve(const PermitRequest& request, io::Waiter& waiter) = 0;
  // reserve() over several keys at once, all or nothing (stores/multi_key.hpp, decide_all()):
  // at most kMaxKeysPerCall requests of distinct keys, sharing one deadline. The default serves
  // one key through reserve(); a store that keeps buckets for several keys overrides it.
  virtual KeysReservation reserve_all(const std::vector<PermitRequest>& requests,
                                      io::Waiter& waiter);
  // The key's new rate and timetable from now on, as change_rate() makes it, or its new settings
  // (change_settings()); false if there is no such bucket (with settings, never: one is made).
  // The next user whose settings differ from the key's is told that it follows them.
  virtual bool set_rate(const RateChange& change) = 0;
  // The buckets kept, sorted by key; only `key`'s when given.
  virtual std::vector<BucketStatus> status(const std::optional<std::string>& key) = 0;
  // Forgets a bucket; false if there was none.
  virtual bool reset(const std::string& key) = 0;
  // The permits go back as give_back() takes them: with a span, only if no one booked after
  // them. Whether they went back (not if there is no such bucket). Quotas keep counting them: a
  // window holds no more than was granted.
  virtual bool give_back(const UnusedPermits& unused) = 0;
  // Returns once the store answers for `key`'s bucket, throws StoreUnavailable if it does not
  // within its own timeout; waits only through `waiter`. Books nothing: it asks whether a store
  // that went away is back. A store on this host is there whenever it is asked.
  virtual void ping(const std::string& /*key*/, io::Waiter& /*waiter*/) {}
  // Records a throttle on `request.key` atomically (record_throttle_report()); none if there is no
  // such bucket. A store that keeps no back-off throws UsageError.
  virtual std::optional<ThrottleResult> throttle(const ThrottleRequest& request);
  // How long `key` stays paused from now (zero: not paused, or no such bucket): a caller whose
  // turn came during a pause reported after it booked the turn waits the pause out and books
  // again. A store that keeps no back-off never pauses.
  virtual std::chrono::nanoseconds pause_left(const std::string& /*key*/) {
    return std::chrono::nanoseconds::zero();
  }
};

// record_throttle() of a report received at `now` on a key of `params`: the report's sending
// time from its `sent_before`, and the key's pause and rate in force after it.
ThrottleResult record_throttle_report(BackoffState& backoff, BucketState& state,
                                      const BucketParams& params, const ThrottleRequest& request,
                                      std::chrono::nanoseconds now);

// A new rate, as Guava's setRate (stored permits rescaled), except to and from no limit
// (infinity), where the bucket starts afresh: leaving "off" does not hand out a burst that nobody
// saved up, and entering it does not wait out a turn booked at the old rate. Every rate change of
// a timetable or of `ratelimit set` goes through here.
void change_rate(TokenBucket& bucket, double permits_per_second, std::chrono::nanoseconds now);

// A key's new settings (`ratelimit set --key`): its parameters as change_rate() changes a rate,
// its quotas as decide() replaces a request's (a quota keeps the counts of the key's quota of
// the same period).
void change_settings(TokenBucket& bucket, std::vector<Quota>& quotas, const BucketParams& params,
                     const std::vector<QuotaParams>& new_quotas, std::chrono::nanoseconds now);

// A rate set by hand (`ratelimit set`): change_rate(), and then a turn booked ahead at a lower rate
// is brought nearer, to when the permits it still owes are paid at the new rate (they are
// converted, not the time): a rate mistyped (one permit at 0.001/s books the next 16 minutes
// ahead) is undone by setting the rate meant. A lowered rate keeps the turn as Guava's setRate
// does. Timetables' own changes of entry stay Guava's (change_rate()).
void set_rate_by_hand(TokenBucket& bucket, double permits_per_second, std::chrono::nanoseconds now);
// The same for a turn `owed` ahead, booked at `old_rate`: when it comes at `new_rate`.
std::chrono::nanoseconds converted_turn(std::chrono::nanoseconds owed, double old_rate,
                                        double new_rate);

// Permits booked and not used go back, as if they had never been booked: the next free moment
// moves back by what they cost at the stable rate, even into the past, where the bucket then
// counts as idle since (a pipe whose last chunk went out late loses no time), but not further
// back than the time the bucket takes to fill. Stored permits are left alone.
// With `booked`, the span of the giver's latest bookings (one after the other, no one else's
// between), only what no later booking has built on goes back: nothing unless the next free
// moment is still the one they left (`until`), and never before the one they found (`from`).
// Without it (a rate set by hand gives back the key's own turn), back in any case. Returns
// whether the next free moment moved.
bool give_back(TokenBucket& bucket, std::int64_t permits, std::chrono::nanoseconds now,
               const std::optional<BookingSpan>& booked);

// The decision on a bucket, its schedule and its quotas loaded at `now` (on the request's
// deadline's timeline), shared by every store: granted at the later of the moments the rate and
// every quota allow (QuotaBucket); refused, nothing is taken from any of them. New quotas keep the
// counts of a quota of the same period (a new limit applies to what was granted), others start
// empty. A key that backs off (`backoff`) is decided at its rate in force and not before its
// pause ends (bucket_in_force()); `bucket` keeps its configured parameters.
Reservation decide(TokenBucket& bucket, KeySchedule& schedule, std::vector<Quota>& quotas,
                   const PermitRequest& request, std::chrono::nanoseconds now,
                   const BackoffState& backoff = {});
// The first part of decide(): the request's settings applied to the key (or followed), nothing
// booked; the reservation says which (followed, replaced_*, key_timetable, key_permits_per_second).
Reservation apply_settings(TokenBucket& bucket, KeySchedule& schedule, std::vector<Quota>& quotas,
                           const PermitRequest& request, std::chrono::nanoseconds now);
// How long after `now` the request's permits may be due to be granted (its deadline's).
std::chrono::nanoseconds timeout_of(const PermitRequest& request, std::chrono::nanoseconds now);

std::vector<QuotaParams> params_of(const std::vector<Quota>& quotas);

// What a key records of the request last told that it follows the key's settings (a fingerprint
// of the request's settings; 0: none told since the key's settings were last set), and the
// rate limit of those notices: tells (tell_followed) a request that followed the key only if its
// settings are not the ones last told, and records them. Every store but Redis (whose script
// does the same) calls it after decide(); a change of the key's settings sets `noticed` to 0.
void notice_followed(Reservation& reservation, const PermitRequest& request,
                     std::uint64_t& noticed);

// BucketStore::set_rate() as set_rate_by_hand() does it: the key's status, the new rate, then
// the permits that the key's turn owes beyond what they take at the new rate given back (at most
// a century of them per call: a few calls). Not one atomic step: requests in between are booked
// as they would be at either rate. Returns the key's status from before the change, or nothing if
// there is no such bucket.
std::optional<std::vector<BucketStatus>> set_key_rate_by_hand(BucketStore& store,
                                                              const RateChange& change);

// What status shows of `quotas` at `now`.
std::vector<QuotaStatus> quota_status(const std::vector<Quota>& quotas,
                                      std::chrono::nanoseconds now);

// What status shows of a usable bucket at `now`.
BucketStatus describe(const std::string& key, TokenBucket bucket, KeySchedule schedule,
                      const std::vector<Quota>& quotas, std::chrono::nanoseconds now,
                      const BackoffState& backoff = {});

}  // namespace ratelimit::stores
