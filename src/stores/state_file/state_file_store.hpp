#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "ratelimit/clock.hpp"
#include "state/state_directory.hpp"
#include "stores/bucket_store.hpp"
#include "stores/state_file/state_file_format.hpp"

namespace ratelimit::stores::state_file {

// The machine and the boot whose monotonic clock the records' times are on.
struct HostId {
  std::string machine_id;  // empty: unknown, records of every machine are taken as this one's
  std::string boot_id;
};

// Buckets kept in one state file per key, shared by every process of this user on this machine.
// Each call opens its own descriptor and holds flock only for the read-modify-write, so waiters
// book their turns in the order they take the lock and sleep without holding it.
class Store final : public BucketStore {
 public:
  // Told why a record was discarded (for --verbose).
  using Notify = std::function<void(const std::string&)>;

  // `clock` must be CLOCK_MONOTONIC's timeline (system_clock()) of the boot `host` names, the
  // timeline of the waiters' deadlines.
  Store(state::StateDirectory directory, Clock& clock, HostId host, Notify notify);

  Reservation reserve(const PermitRequest& request, io::Waiter& waiter) override;
  // The keys' files locked in the order of their names, the same for every caller, so that two
  // calls over the same keys in any order never wait for each other's locks.
  KeysReservation reserve_all(const std::vector<PermitRequest>& requests,
                              io::Waiter& waiter) override;
  bool set_rate(const RateChange& change) override;
  std::vector<BucketStatus> status(const std::optional<std::string>& key) override;
  bool reset(const std::string& key) override;
  bool give_back(const UnusedPermits& unused) override;
  std::optional<ThrottleResult> throttle(const ThrottleRequest& request) override;
  std::chrono::nanoseconds pause_left(const std::string& key) override;

  const state::StateDirectory& directory() const { return directory_; }

 private:
  // The bucket a file holds at `now`, or why it cannot be used.
  DecodedRecord load(const state::LockedFile& file, std::chrono::nanoseconds now) const;
  struct KeyLimits {
    TokenBucket bucket;
    KeySchedule schedule;
    std::vector<Quota> quotas;
    std::string notation;
    std::uint64_t noticed = 0;  // StateRecord::noticed
    BackoffState backoff;
    bool fresh = false;  // made by the request: the file held no bucket that can be used
  };
  // The bucket of `file`, its schedule, quotas and notation at `now`: its record's, or fresh ones
  // made by `request`.
  KeyLimits load_bucket(const state::LockedFile& file, const PermitRequest& request,
                        std::chrono::nanoseconds now) const;
  void save(state::LockedFile& file, const TokenBucket& bucket, const KeySchedule& schedule,
            const std::vector<Quota>& quotas, const std::string& notation, std::uint64_t noticed,
            const BackoffState& backoff) const;
  // Changes the bucket of `key`, its schedule and its record of the settings last told under the
  // lock, at the time given; false if there is no bucket that can be used.
  using Update = std::function<void(TokenBucket&, KeySchedule&, std::uint64_t& noticed,
                                    std::chrono::nanoseconds now)>;
  bool update_existing(const std::string& key, const Update& update);
  // set_rate() with settings: the key's bucket changed, or made.
  bool set_settings(const RateChange& change);

  state::StateDirectory directory_;
  Clock& clock_;
  HostId host_;
  Notify notify_;
};

}  // namespace ratelimit::stores::state_file
