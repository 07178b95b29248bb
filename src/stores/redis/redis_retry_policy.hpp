#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "stores/redis/redis_connection.hpp"

namespace ratelimit::stores::redis {

// Thrown by one try of a command (Topology::command_once) that met a failover: under Sentinel a
// master lost, hanging, demoted (READONLY, NOREPLICAS) or not one yet; in a Cluster a node that a
// MOVED named lost or hanging, CLUSTERDOWN or TRYAGAIN. RetryPolicy decides whether to try again.
class FailingOver : public StoreUnavailable {
 public:
  // `cause` is what happened; `too_long` what the request fails with once its failover budget is
  // spent; `notice` is said once per request (--verbose), none when empty. `may_have_run`: the
  // command went out and its reply did not come (lost or late), so it may have run.
  FailingOver(const std::string& cause, std::string too_long, std::string notice, bool may_have_run)
      : StoreUnavailable(cause),
        too_long_(std::move(too_long)),
        notice_(std::move(notice)),
        may_have_run_(may_have_run) {}
  const std::string& too_long() const { return too_long_; }
  const std::string& notice() const { return notice_; }
  bool may_have_run() const { return may_have_run_; }

 private:
  std::string too_long_;
  std::string notice_;
  bool may_have_run_;
};

// Thrown by one try whose command did not run, and that is sent again at once, changed: a
// Cluster's MOVED (to the node it names, which the Topology keeps for the key) or ASK (to the node
// it names, for this command only), or a function missing (once the store has loaded the
// script's library there). Its message (the reply, with the server) is what the request fails with
// once RetryPolicy sends it no more.
class NotRun : public StoreUnavailable {
 public:
  enum class Reply { moved, ask, function_missing };
  NotRun(Reply reply, const std::string& message) : StoreUnavailable(message), reply_(reply) {}
  Reply reply() const { return reply_; }

 private:
  Reply reply_;
};

// Thrown by one try that asked every sentinel and none named a master that is one, and no
// failover is under way (none answered, or each knows no such master): RetryPolicy asks again
// after kFailoverPause within the request's timeout, then the request fails with the message.
class NoMasterNamed : public StoreUnavailable {
 public:
  using StoreUnavailable::StoreUnavailable;
};

// Between two tries while a failover is under way, and between two rounds of the sentinels.
inline constexpr std::chrono::milliseconds kFailoverPause{50};

// How long a server that refuses or drops connections is waited for before --on-redis-error
// applies: a restart (stopped, started again, its data loaded) takes well under a second for the
// small data of buckets, and a service manager's restart a second or two; past 5 s it is an
// outage, said and handled as one.
inline constexpr std::chrono::milliseconds kRestartBudget{5000};

// The first pause before a server that refused is asked again, and the longest: a restart is met
// within a few milliseconds of its end, and the hosts it met do not come back all at once.
inline constexpr std::chrono::milliseconds kFirstRestartPause{20};
inline constexpr std::chrono::milliseconds kLongestRestartPause{250};

// The one retry loop of a request on Redis. Each try of it (run's `attempt`) sends the request
// once, and says what went wrong by what it throws; the policy decides whether to wait and try
// again or give up, and spends the request's deadline once:
// - a connection refused or dropped, or LOADING (ConnectionLost): tried again at once, then after
//   a jittered pause that doubles (20 ms to 250 ms), until kRestartBudget from the first trouble
//   of the request;
// - a failover (FailingOver): tried again after kFailoverPause, until the request's failover
//   budget (Deadline::failover_budget) ends;
// - a command that did not run (NotRun: MOVED, ASK, a function missing): sent again at once
//   within the same deadline, since it cannot count twice: one MOVED and then one ASK, and one
//   missing function, per try that ran (a failover or a restart opens the count again: a server
//   started again may redirect or lack the function anew); a reply more fails the request;
// - no master named by the sentinels (NoMasterNamed): asked again after kFailoverPause within the
//   same deadline (the operation's timeout), then the request fails;
// - either way, never past the request's own deadline (Deadline::refuse_after): a try that comes
//   after it throws TooLate, which gives up at once (with the last connection lost, if any);
// - a request that may have run (its reply lost or late) is sent again only if its command may be
//   (may_send_again, told by sending()), and after a lost connection once at most: the key may
//   pay twice, never grant twice.
// Each try after the first has a --redis-timeout of its own (`deadline` renewed).
class RetryPolicy {
 public:
  using Notify = std::function<void(const std::string&)>;
  // What this loop waits for. The agent waits for failovers only: a restart goes back to its
  // caller, whose own policy waits for it (and sends the request to the agent again), so that a
  // request meets one loop however far it is relayed.
  enum class Waits { restarts_and_failovers, failovers };

  RetryPolicy(Deadline& deadline, std::chrono::milliseconds timeout,
              std::chrono::milliseconds failover_timeout, Waits waits, Notify notify,
              std::minstd_rand& jitter)
      : deadline_(deadline),
        timeout_(timeout),
        failover_timeout_(failover_timeout),
        waits_(waits),
        notify_(std::move(notify)),
        jitter_(jitter) {}

  // Told by each try before it sends `command`: whether it may be sent again once it may have run
  // is the command's own (may_send_again), the same on the direct path and in the agent, which
  // relays the very command. A try that sends none (the status listing's SCAN reads only) may be.
  void sending(const std::vector<std::string>& command);

  // Runs `attempt` (one try, which returns the result) until it returns or the policy gives up:
  // then what the last try threw is thrown (a failover past its budget as StoreUnavailable saying
  // so).
  template <typename Attempt>
  auto run(Attempt attempt) {
    while (true) {
      ++tries_;
      try {
        return attempt();
      } catch (const TooLate&) {
        // The request's deadline passed while the server was away (a try through the agent that
        // came after it): unavailable, as the direct path says, not a refusal the server made.
        if (last_loss_) std::rethrow_exception(last_loss_);
        throw;
      } catch (const NotRun& not_run) {
        after_not_run(not_run);
        continue;  // within the same deadline: the command did not run
      } catch (const NoMasterNamed&) {
        if (deadline_.passed()) throw;
        deadline_.pause(kFailoverPause);
        // A round at the timeout's end would ask nobody: the last one's cause is the failure.
        if (deadline_.passed()) throw;
        continue;  // within the same deadline: the operation's timeout bounds the search
      } catch (const FailingOver& failing) {
        after_failover(failing);
      } catch (const ConnectionLost& lost) {
        if (waits_ == Waits::failovers) throw;
        last_loss_ = std::current_exception();
        after_loss(lost);
      }
      deadline_ = deadline_.renewed(timeout_);
      not_run_ = {};
    }
  }

  // How many tries run() made.
  int tries() const { return tries_; }

 private:
  // Each returns to try again, or throws (the failure being handled, or what it means).
  void after_not_run(const NotRun& not_run);
  void after_failover(const FailingOver& failing);
  void after_loss(const ConnectionLost& lost);
  // Opens the request's restart budget at its first trouble, whatever the kind.
  void first_trouble();

  Deadline& deadline_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds failover_timeout_;
  Waits waits_;
  bool resend_if_reply_lost_ = true;
  Notify notify_;
  std::minstd_rand& jitter_;
  int tries_ = 0;
  // From the first trouble of the request: a server that answered until then may be restarting.
  std::optional<Deadline> restart_;
  bool retried_at_once_ = false;
  bool resent_after_loss_ = false;
  bool failover_told_ = false;
  // The replies of NotRun met since the last try that ran.
  struct NotRunMet {
    bool moved = false;
    bool ask = false;
    bool function_missing = false;
  } not_run_;
  std::chrono::milliseconds pause_ = kFirstRestartPause;
  std::exception_ptr last_loss_;
};

}  // namespace ratelimit::stores::redis
