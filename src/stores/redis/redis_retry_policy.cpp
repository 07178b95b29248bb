#include "stores/redis/redis_retry_policy.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "format/quantities.hpp"
#include "stores/redis/redis_script_protocol.hpp"

namespace ratelimit::stores::redis {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

void RetryPolicy::first_trouble() {
  if (!restart_) restart_.emplace(deadline_.renewed(kRestartBudget));
}

void RetryPolicy::sending(const std::vector<std::string>& command) {
  resend_if_reply_lost_ = may_send_again(command);
}

void RetryPolicy::after_not_run(const NotRun& not_run) {
  // One MOVED (the slot has another master) and then one ASK (it is being migrated), and one
  // missing function (the store has loaded it): a reply more means the servers disagree, and is
  // the error.
  bool& met = not_run.reply() == NotRun::Reply::moved ? not_run_.moved
              : not_run.reply() == NotRun::Reply::ask ? not_run_.ask
                                                      : not_run_.function_missing;
  const bool after_ask = not_run.reply() == NotRun::Reply::moved && not_run_.ask;
  if (met || after_ask) throw;
  met = true;
}

void RetryPolicy::after_failover(const FailingOver& failing) {
  // Sent again, a command that may have run would run twice: for what must not (a give-back),
  // the failover ends the request here, as a lost reply does.
  if (failing.may_have_run() && !resend_if_reply_lost_) throw;
  first_trouble();
  if (!failing.notice().empty() && !failover_told_) notify_(failing.notice());
  failover_told_ = true;
  Deadline failover = deadline_.failover_budget(failover_timeout_);
  if (failover.passed()) throw StoreUnavailable(failing.too_long());
  failover.pause(kFailoverPause);
}

void RetryPolicy::after_loss(const ConnectionLost& lost) {
  if (lost.sent() && (!resend_if_reply_lost_ || resent_after_loss_)) throw;
  resent_after_loss_ |= lost.sent();
  first_trouble();
  if (!retried_at_once_) {
    // Tried again at once: a connection dropped while idle (CLIENT KILL, a proxy's timeout) is
    // made again on a server that is there.
    retried_at_once_ = true;
    notify_(std::string(lost.what()) +
            (lost.sent() ? "; sending the request again" : "; connecting again"));
    return;
  }
  // Past the budget (the last try was at its end): an outage.
  if (restart_->passed()) {
    if (!lost.sent())
      throw ConnectionLost(
          fmt::format("{} for {}", lost.what(), format::human_duration(kRestartBudget)), false);
    throw;
  }
  // A pause of between half and all of `pause_` (cut short at the budget's end, for a last try
  // there), then one twice as long, up to the longest.
  const auto jittered =
      std::uniform_int_distribution<milliseconds::rep>(pause_.count() / 2, pause_.count())(jitter_);
  if (const nanoseconds left = deadline_.refused_at() - deadline_.waiter().now();
      left <= milliseconds(jittered)) {
    // The request's own deadline (--timeout) comes first: answered at it, not a pause before.
    restart_->pause(left);
    throw;
  }
  restart_->pause(milliseconds(jittered));
  pause_ = std::min(pause_ * 2, kLongestRestartPause);
}

}  // namespace ratelimit::stores::redis
