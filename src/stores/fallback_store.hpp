#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "errors.hpp"
#include "io/background_task.hpp"
#include "stores/bucket_store.hpp"

namespace ratelimit::stores {

// What to do when a store shared by every host cannot answer.
enum class OnUnavailable {
  fail,   // StoreUnavailable reaches main: exit 69, the command is not run
  allow,  // grant every request at once (unthrottled), after one warning
  local,  // take the permits from this host's bucket of the same key instead
};

// The policy as the user chose it.
struct UnavailablePolicy {
  OnUnavailable action = OnUnavailable::fail;
  // local: the share of the key's rate that this host's bucket grants (0 < share <= 1). A fleet
  // of N hosts then grants at most N x share x rate while the store is away, plus each host's
  // burst (README, man page).
  double local_share = 1.0;
  // How the user chose it, e.g. "--on-redis-error=local:25%", shown in parentheses after each
  // message that it applies or ends; empty: not said.
  std::string said_as;
};

// A shared store with a policy for its outages. A request that the store cannot answer (after
// the store's own retries: a Redis connection lost is made again first, a restart waited for)
// starts an outage: the policy answers it and every request after it, while the store is asked
// again in the background (a PING), at most once per kProbeInterval and never on a request's own
// time; the first request after it answered goes to the store again, and the outage ends only if
// the store decides it (a server that answers PING may still refuse the script: out of memory,
// read-only). Each outage and each return is one line through `warn`. A request whose answer was
// lost may have been booked by the store: it is not sent again, and is booked again by the policy
// (the key may pay twice, never grant twice). Permits booked during the outage are never booked
// again (the user holds them), and permits given back go to the store that booked them.
class FallbackStore final : public BucketStore {
 public:
  using OpenLocal = std::function<std::unique_ptr<BucketStore>()>;
  using Warn = std::function<void(const std::string&)>;
  using RunInBackground =
      std::function<std::unique_ptr<io::BackgroundTask>(std::function<void(io::Waiter&)>)>;

  // `shared_name` names the shared store in messages ("Redis at redis://h"). `open_local` opens
  // this host's store, the first time it is needed. `run_in_background` runs the probes.
  FallbackStore(std::unique_ptr<BucketStore> shared, std::string shared_name,
                UnavailablePolicy policy, OpenLocal open_local, Warn warn,
                RunInBackground run_in_background = io::run_in_background);
  ~FallbackStore() override;
  FallbackStore(const FallbackStore&) = delete;
  FallbackStore& operator=(const FallbackStore&) = delete;

  Reservation reserve(const PermitRequest& request, io::Waiter& waiter) override;
  // Several keys go to the shared store in one call; while it is away, the policy answers for all
  // of them (this host's buckets of the keys, all or nothing, each at its share).
  KeysReservation reserve_all(const std::vector<PermitRequest>& requests,
                              io::Waiter& waiter) override;
  // set_rate, status and reset are about the shared store: its failure is always an error.
  bool set_rate(const RateChange& change) override;
  std::vector<BucketStatus> status(const std::optional<std::string>& key) override;
  bool reset(const std::string& key) override;
  bool give_back(const UnusedPermits& unused) override;
  // About the shared store, as status.
  std::optional<ThrottleResult> throttle(const ThrottleRequest& request) override;
  std::chrono::nanoseconds pause_left(const std::string& key) override;

 private:
  enum class Store { shared, local, none };
  struct Booking {
    Store store;
    std::int64_t permits;
  };

  void begin_outage(const StoreUnavailable& error, const std::vector<std::string>& keys,
                    std::chrono::nanoseconds now);
  // Whether the last probe found the store answering (then the request asks it: the outage ends
  // with a decision it makes, not with the probe); starts the next probe when due.
  bool probe_answered(const std::string& key, std::chrono::nanoseconds now);
  // The shared store to itself again: no probe left running on it.
  BucketStore& shared_alone();
  Reservation reserve_by_policy(const PermitRequest& request, io::Waiter& waiter);
  void note_booking(const std::string& key, Store store, std::int64_t permits);
  bool give_back_to(Store store, const UnusedPermits& unused);
  std::string said_as() const;

  std::unique_ptr<BucketStore> shared_;
  std::string shared_name_;
  UnavailablePolicy policy_;
  OpenLocal open_local_;
  Warn warn_;
  RunInBackground run_in_background_;
  std::unique_ptr<BucketStore> local_;
  bool outage_ = false;
  std::chrono::nanoseconds next_probe_at_{0};
  std::unique_ptr<io::BackgroundTask> probe_;
  // Set by the probe before it returns: read only once probe_ is done.
  bool probe_answered_ = false;
  // The last bookings of each key, latest last: unused permits (the latest booked) go back to
  // the store that booked them.
  std::map<std::string, std::deque<Booking>> bookings_;
};

// How often a store that went away is asked again.
inline constexpr std::chrono::nanoseconds kProbeInterval = std::chrono::seconds(1);

}  // namespace ratelimit::stores
