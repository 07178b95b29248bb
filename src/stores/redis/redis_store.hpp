#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "io/waiter.hpp"
#include "stores/bucket_store.hpp"
#include "stores/redis/redis_relay.hpp"
#include "stores/redis/redis_retry_policy.hpp"
#include "stores/redis/redis_settings.hpp"
#include "stores/redis/redis_topology.hpp"

namespace ratelimit::stores::redis {

// Buckets kept in Redis under ratelimit:{KEY} (the braces keep a key in one Cluster slot), shared
// by every host that reaches the server. Each decision is one call of redis_bucket.lua, atomic on
// the server and timed by the server's clock; only relative waits come back.
class Store final : public BucketStore {
 public:
  // Told why a record was discarded (for --verbose).
  using Notify = std::function<void(const std::string&)>;

  // Connects at the first call. The settings' `timeout` bounds each operation as a whole: its
  // connection (TLS included, with their `tls` for rediss:// nodes) and every command it sends;
  // a failover has their `failover_timeout` (Topology), and `warn` is told of two masters at
  // once. TLS files that cannot be used are found by the first call that connects (or the agent
  // serving it), which throws as Tls.
  explicit Store(
      Settings settings, Notify notify = [](const std::string&) {},
      Notify warn = [](const std::string&) {});

  // The round trip counts against the request's deadline, as the state file's lock does: an
  // answer not come by then (or by kAnswerGrace from the call, whichever is later) is a refusal,
  // the connection closed (the call may have booked). A stop signal ends it at once, the same.
  // A server that restarts is waited for (with_retries): a connection it ended while the reply
  // was awaited is made again and the request sent once more: the key may pay twice for it (the
  // first may have been booked), never grant twice.
  Reservation reserve(const PermitRequest& request, io::Waiter& waiter) override;
  // One script call over all the keys (reserve_all of redis_bucket.lua), with reserve()'s
  // deadline and retries. In a Cluster the keys must share a slot (names that start with the same
  // {tag}): keys on several slots throw UsageError naming them (the server's CROSSSLOT).
  KeysReservation reserve_all(const std::vector<PermitRequest>& requests,
                              io::Waiter& waiter) override;
  bool set_rate(const RateChange& change) override;
  std::vector<BucketStatus> status(const std::optional<std::string>& key) override;
  bool reset(const std::string& key) override;
  bool give_back(const UnusedPermits& unused) override;
  // Connected to the node (or master) that serves `key`, and a PING answered (a restart waited
  // for, as by every operation).
  void ping(const std::string& key, io::Waiter& waiter) override;
  std::optional<ThrottleResult> throttle(const ThrottleRequest& request) override;
  // The key's status read: a call on a key that backs off only (Reservation::backing_off).
  std::chrono::nanoseconds pause_left(const std::string& key) override;

  // The decision for permits due within `timeout` (Guava tryAcquire; nanoseconds::max(): no
  // limit), at a time the caller gives in Unix microseconds instead of the server's TIME: for the
  // golden vectors only. The reply is waited for through `stop_waiter` when given
  // (Interrupted). In one RetryPolicy, as every operation; those given a `deadline` are one try
  // of it.
  Reservation reserve_at(const PermitRequest& request, std::chrono::nanoseconds timeout,
                         std::optional<std::int64_t> now_micros, io::Waiter* stop_waiter = nullptr);
  Reservation reserve_at(const PermitRequest& request, std::chrono::nanoseconds timeout,
                         std::optional<std::int64_t> now_micros, Deadline& deadline);
  KeysReservation reserve_all_at(const std::vector<PermitRequest>& requests,
                                 std::chrono::nanoseconds timeout,
                                 std::optional<std::int64_t> now_micros, Deadline& deadline);
  KeysReservation reserve_all_at(const std::vector<PermitRequest>& requests,
                                 std::chrono::nanoseconds timeout,
                                 std::optional<std::int64_t> now_micros);
  std::optional<BucketStatus> status_at(const std::string& key,
                                        std::optional<std::int64_t> now_micros);
  bool give_back_at(const UnusedPermits& unused, std::optional<std::int64_t> now_micros);
  bool set_rate_at(const RateChange& change, std::optional<std::int64_t> now_micros);
  std::optional<ThrottleResult> throttle_at(const ThrottleRequest& request,
                                            std::optional<std::int64_t> now_micros);

  // Commands go through the host agent from now on, and to the server itself whenever there is
  // no agent.
  void relay_through(RelayClient relay) { relay_.emplace(std::move(relay)); }

  const std::string& shown_url() const { return topology_.shown_url(); }

 private:
  // The deadline of an operation starting now.
  Deadline operation_deadline(io::Waiter* stop_waiter = nullptr) const {
    return Deadline(timeout_, stop_waiter);
  }
  // Runs `attempt` (one try of an operation, which sends it once) within `deadline`, tried again
  // as the request's one RetryPolicy decides: while the server restarts (refuses or drops
  // connections, answers LOADING: ConnectionLost), through a failover (FailingOver), after a
  // command that did not run (NotRun: a Cluster's redirect, no function) and while the sentinels
  // name no master (NoMasterNamed). Whether a command that may have run is sent again, the command
  // says (send() tells the policy, as the agent's does). This is the one loop of an operation:
  // what it calls tries once (through the agent, the agent's loop waits for a failover and
  // follows a redirect, and this one waits for a restart and calls the function again once it has
  // loaded it).
  template <typename Attempt>
  auto with_retries(Deadline& deadline, Attempt attempt);
  // The command sent once: through the agent when there is one, else to the server.
  Value send(const std::string& bucket_key, const std::vector<std::string>& arguments,
             Deadline& deadline);
  // Connected to the node that serves `bucket_key` (the agent's business when it relays).
  void connect(const std::string& bucket_key, Deadline& deadline);
  // Calls the script's function; where the server has none, loads the library and throws NotRun
  // (the policy calls it again); as send(). An error reply throws StoreUnavailable; LOADING,
  // ConnectionLost (not sent).
  Value run_script(const std::string& key, std::vector<std::string> arguments, Deadline& deadline);
  // The same over several keys (KEYS[1..n]), sent where the first one is served.
  Value run_script_on(const std::vector<std::string>& keys, std::vector<std::string> arguments,
                      Deadline& deadline);
  [[noreturn]] void unexpected_reply(const Value& reply) const;
  // The store as errors name it.
  std::string server() const { return "Redis at " + shown_url(); }

  Notify notify_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds failover_timeout_;
  // Spreads the retries of the hosts that a restart met over the pause.
  std::minstd_rand jitter_{std::random_device{}()};
  Topology topology_;
  std::optional<RelayClient> relay_;
  // The policy of the operation under way (with_retries), told each command sent.
  RetryPolicy* retries_ = nullptr;
};

// However near a request's deadline, a call waits this long for Redis's answer (connect included)
// before it refuses: `--try` still asks a server that answers at once, and one that does not
// answer within it is refused (exit 75) instead of waited for. Loopback and LAN round trips, a TLS
// handshake included, take well under it.
inline constexpr std::chrono::milliseconds kAnswerGrace{50};

// The Redis key of a bucket.
std::string redis_key(const std::string& key);

}  // namespace ratelimit::stores::redis
