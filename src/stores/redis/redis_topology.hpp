#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/waiter.hpp"
#include "stores/redis/redis_connection.hpp"
#include "stores/redis/redis_settings.hpp"

namespace ratelimit::stores::redis {

// The connections to a deployment, and which node answers for a key: the one server; the node of
// a Cluster that a MOVED or ASK reply names; the master that the sentinels name, found again after
// a failover.
class Topology {
 public:
  // Told which node answers, when that is news (for --verbose); or warned.
  using Notify = std::function<void(const std::string&)>;

  // Connects at the first command to the settings' deployment, over TLS with their `tls` to
  // rediss:// nodes (sentinels are asked in the clear). Their `timeout` bounds an operation and
  // the search for a master while no sentinel names one that could be it; their
  // `failover_timeout` bounds a failover: the search once a master went away, stopped answering
  // or was demoted, or a sentinel named one that is not reachable or not a master (yet), and the
  // request sent again there. `warn` is told of two masters at once. The TLS files are loaded
  // when a connection first needs them (OpenSSL's set-up costs milliseconds of CPU, for nothing
  // when the agent answers): the call that needs them throws as Tls for one that cannot be used.
  Topology(Settings settings, Notify notify, Notify warn);

  // Sends `arguments`, a command on `redis_key` alone, to the node that serves the key, within
  // `deadline`, once (command_once), and again as RetryPolicy decides: after a redirect, a search
  // of the sentinels that found no master, or a failover (a server that refuses connections or
  // drops one throws ConnectionLost, for the caller's policy); one that may have run is sent again
  // only if the command may be (may_send_again). This is the agent's loop; the direct path runs
  // command_once in its own.
  Value command(const std::string& redis_key, const std::vector<std::string>& arguments,
                Deadline& deadline);
  // One try of the command: sent to the node that serves the key, as Connection::command
  // otherwise. A Cluster's MOVED or ASK throws NotRun (the command did not run): the node it names
  // is where the next try sends it. Sentinels that name no master throw NoMasterNamed. A failover
  // throws FailingOver: under Sentinel, a READONLY or NOREPLICAS reply (a demoted master: nothing
  // was written), a connection lost, a master that does not answer within `deadline` (it went
  // away or hangs) or none that is a master yet; in a Cluster, a node that a MOVED named lost or
  // hanging, CLUSTERDOWN and TRYAGAIN. The master is then searched for anew by the next try. A
  // server that refuses connections (restarting) throws ConnectionLost (not sent), as one that
  // dropped the connection. The failover budget is the request's (Deadline::failover_budget).
  Value command_once(const std::string& redis_key, const std::vector<std::string>& arguments,
                     Deadline& deadline);
  // The commands of `commands` (each a command on its `redis_key` alone) in one write, their
  // replies in order, when they all go to the one server of the deployment: not under Sentinel,
  // and no key that a MOVED sent to another node. Nothing when they cannot be sent so (then
  // command() each); throws as Connection::pipeline. A reply for which sent_elsewhere() holds
  // did not run there: command() sends it again, the Cluster's way.
  std::optional<std::vector<Value>> pipeline(
      const std::vector<std::pair<std::string, std::vector<std::string>>>& commands,
      Deadline& deadline);
  // A Cluster's MOVED, ASK, CLUSTERDOWN or TRYAGAIN: the command did not run.
  static bool sent_elsewhere(const Value& reply);
  // When a command last met a failover here (on its deadline's waiter), or zero: the agent lets a
  // request that waited behind one wait for the failover, as its caller does alone.
  std::chrono::nanoseconds last_failover() const { return last_failover_; }
  // Connects to the node that serves `redis_key`, if not connected yet, within `deadline`; after
  // a failover, `deadline` is renewed for what follows.
  void connect(const std::string& redis_key, Deadline& deadline);
  // Calls `visit` with a connection to each master: the server, each master of its Cluster, or the
  // master that the sentinels name.
  void for_each_master(Deadline& deadline, const std::function<void(Connection&)>& visit);

  const std::string& shown_url() const { return deployment_.shown; }

 private:
  Value command_on_master(const std::vector<std::string>& arguments, Deadline& deadline);
  // As command_following_redirect; a failover (a node a MOVED named lost or hanging,
  // CLUSTERDOWN, TRYAGAIN) throws FailingOver.
  Value command_in_cluster(const std::string& redis_key, const std::vector<std::string>& arguments,
                           Deadline& deadline);
  // The command sent to the key's node: the one that the key's last MOVED named, or for the
  // command after an ASK the one it named. A MOVED or ASK throws NotRun.
  Value command_following_redirect(const std::string& redis_key,
                                   const std::vector<std::string>& arguments, Deadline& deadline);
  // The connection to the master, searched for if there is none (find_master).
  Connection& master(Deadline& deadline, Deadline& failover, bool after_loss);
  // The master the sentinels name that says it is one (ROLE), in one round: the sentinels are asked
  // in turn, from the one that named the master last, each within a share of `timeout`, and so is
  // each master one names: a host that hangs costs its share, not the search. None found throws
  // NoMasterNamed (RetryPolicy asks again within `outage`, the operation's deadline), unless a
  // sentinel named a master that is not reachable or not a master (yet): a failover, which throws
  // FailingOver after the round (RetryPolicy waits, and the next try asks again); its steps are
  // within `failover` then.
  // After a failover `outage` is renewed for what follows. After a failover, or `after_loss` of
  // the master mid-run, the other sentinels are asked too (look_for_a_second_master).
  Connection find_master(Deadline& outage, Deadline& failover, bool after_loss);
  // The address that `sentinel` names as the master, within `deadline`; none (and `cause` says
  // why) if it names none.
  std::optional<Address> ask_sentinel(const Address& sentinel, Deadline& deadline,
                                      std::string& cause);
  // Asks the sentinels other than the one that named the master which master they name, each
  // within a share of a new `timeout` for `request`: warns once if another says it is the master
  // too (a split brain).
  void look_for_a_second_master(const Deadline& request);
  // What a request fails with once its failover budget is spent.
  std::string failover_too_long(const std::string& cause) const;
  // The kept connection to `node` (named by its shown URL), connected again if it was lost.
  Connection& node_connection(const Address& node, Deadline& deadline);
  // The TLS settings for a connection to `node`, loaded at the first that needs them; none for a
  // node in the clear.
  const Tls* tls_for(const Address& node);

  Deployment deployment_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds failover_timeout_;
  Notify notify_;
  Notify warn_;
  TlsOptions tls_options_;
  std::optional<Tls> tls_;
  // sentinel: the master, and where it is (shown).
  std::optional<Connection> master_;
  std::string master_shown_;
  std::chrono::nanoseconds last_failover_{0};
  // sentinel: the one asked first (the last that named the master).
  std::size_t first_sentinel_ = 0;
  // sentinel: the parts of `timeout_` that a sentinel and a master it names are asked within.
  std::chrono::milliseconds sentinel_share_;
  std::chrono::milliseconds master_share_;
  bool warned_of_two_masters_ = false;
  // sentinel: the master was lost (or demoted) and not yet found again; cluster: the last try met
  // a failover. The next command answered ends the failover (last_failover).
  bool master_lost_ = false;
  bool cluster_failing_over_ = false;
  // For RetryPolicy (failovers are not jittered, but the policy takes one).
  std::minstd_rand jitter_{std::random_device{}()};
  // server: by shown URL; the server itself and the Cluster nodes redirected to.
  std::map<std::string, Connection> nodes_;
  // The node a MOVED named for a Redis key.
  std::map<std::string, Address> key_nodes_;
  // The redirects that a Redis key's command met and has not been answered after yet: what they
  // said (shown under --verbose once it is), and the node that an ASK named for the next try.
  struct Redirected {
    std::vector<std::string> followed;
    std::optional<Address> asked;
  };
  std::map<std::string, Redirected> redirected_;
  // The redirects said under --verbose: each once, not once per request while a slot migrates.
  std::set<std::string> redirects_said_;
};

}  // namespace ratelimit::stores::redis
