#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ratelimit/quota.hpp"
#include "ratelimit/token_bucket.hpp"
#include "stores/bucket_store.hpp"

// The reader of tests/golden_vectors.txt (its header describes the format) and a replay of one
// vector against any store.
namespace ratelimit::testing {

struct GoldenRequest {
  std::chrono::nanoseconds at{0};
  std::int64_t permits = 1;
  std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max();  // forever
  bool apply_params = true;
  BucketParams params;
  std::vector<QuotaParams> quotas;
  std::string timetable;  // the request's schedule (stores::KeySchedule)
  std::int64_t entry_until = 0;
  // Expected; none where the file says '?' (a vector being written: the test prints the answer).
  std::optional<bool> granted;
  std::optional<std::chrono::microseconds> wait;  // microseconds::max(): forever
  // Expected only where the line says so.
  std::optional<bool> replaced;
  std::optional<std::string> key_timetable;
  std::optional<bool> followed;
  // The key of a request_all's part; empty: the vector's one bucket.
  std::string key{};
};

// A request over several keys at once (`request_all`): each key's part is a GoldenRequest whose
// `key` names it; the call's answer is expected of the whole.
struct GoldenRequestAll {
  std::vector<GoldenRequest> keys;  // in the order the vector's `key` lines declare them
  std::optional<bool> granted;
  std::optional<std::chrono::microseconds> wait;  // the longest
  std::optional<std::string> held_by;             // "none": no key held the call
};

struct GoldenSetRate {
  std::chrono::nanoseconds at{0};
  double rate = 0.0;
  std::string timetable;
  std::int64_t entry_until = 0;
};

struct GoldenGiveBack {
  std::chrono::nanoseconds at{0};
  std::int64_t permits = 0;
  // The vector's requests, counted from 1, whose span the permits come from: from the first's to
  // the last's. None: no span.
  std::optional<std::pair<int, int>> booked;
  std::optional<bool> moved;  // expected only where the line says so
};

// A report of "too many" on the key (stores::ThrottleRequest), and what it must do.
struct GoldenThrottle {
  std::chrono::nanoseconds at{0};
  std::chrono::nanoseconds sent_before{0};
  std::chrono::nanoseconds retry_after{0};
  // Expected only where the line says so.
  std::optional<bool> new_event;
  std::optional<std::chrono::microseconds> paused;  // the pause left after it
  std::optional<double> rate;                       // the rate in force after it
};

// One quota as a store's status shows it.
struct GoldenQuotaStatus {
  std::int64_t limit = 0;
  std::int64_t used = 0;
  std::chrono::nanoseconds next_free_in{0};  // compared in whole microseconds

  friend bool operator==(const GoldenQuotaStatus&, const GoldenQuotaStatus&) = default;
};

struct GoldenStatus {
  std::chrono::nanoseconds at{0};
  // Expected, in the key's order.
  std::vector<GoldenQuotaStatus> quotas;
};

struct GoldenStep {
  int line = 0;
  std::string text;  // the line as written
  std::optional<GoldenRequest> request;
  std::optional<GoldenSetRate> set_rate;
  std::optional<GoldenGiveBack> give_back;
  std::optional<GoldenStatus> status;
  std::optional<GoldenThrottle> throttle;
  std::optional<GoldenRequestAll> request_all{};
};

struct GoldenVector {
  std::string name;
  std::vector<GoldenStep> steps;
};

// Throws std::runtime_error naming the line of anything it does not understand.
std::vector<GoldenVector> read_golden_vectors(const std::string& path);

// What a store answers to a request.
struct GoldenAnswer {
  bool granted = false;
  std::chrono::nanoseconds wait{0};
  bool replaced = false;
  std::string key_timetable{};
  bool followed = false;         // told that it follows the key's settings (Reservation::followed)
  stores::BookingSpan booked{};  // granted: the store's marks, handed back to it as they are
};

// What a store answers to a request over several keys.
struct GoldenKeysAnswer {
  bool granted = false;
  std::chrono::nanoseconds wait{0};
  std::optional<std::size_t> held_by;  // index into GoldenRequestAll::keys
};

// A store's answers as the vectors compare them, whatever the store.
GoldenAnswer golden_answer(const stores::Reservation& reservation);
GoldenKeysAnswer golden_keys_answer(const stores::KeysReservation& reservation);
std::vector<GoldenQuotaStatus> golden_quotas(const std::vector<stores::QuotaStatus>& quotas);

// A store as the vectors drive it: a fresh bucket per vector, made by the first request.
class GoldenStore {
 public:
  virtual ~GoldenStore() = default;
  virtual GoldenAnswer request(const GoldenRequest& request) = 0;
  virtual void set_rate(const GoldenSetRate& change) = 0;
  // Whether the bucket's next free moment moved.
  virtual bool give_back(const GoldenGiveBack& unused,
                         const std::optional<stores::BookingSpan>& booked) = 0;
  // The key's back-off after the report (none: no bucket).
  virtual std::optional<stores::ThrottleResult> throttle(const GoldenThrottle& report) = 0;
  // The key's quotas as status shows them at `at`.
  virtual std::vector<GoldenQuotaStatus> status(std::chrono::nanoseconds at) = 0;
  // Several keys decided together (BucketStore::reserve_all), each made by its first request.
  virtual GoldenKeysAnswer request_all(const std::vector<GoldenRequest>& keys) = 0;
};

// Replays `vector` on `store`; returns one message per mismatch, each with the line as the store
// would have it written.
std::vector<std::string> replay(const GoldenVector& vector, GoldenStore& store);

}  // namespace ratelimit::testing
