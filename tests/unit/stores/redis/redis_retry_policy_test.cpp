#include "stores/redis/redis_retry_policy.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "stores/redis/redis_script_protocol.hpp"

namespace ratelimit::stores::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr milliseconds kTimeout{200};
constexpr milliseconds kFailoverTimeout{2000};

// Script calls as the store sends them (and the agent relays them).
const std::vector<std::string> kReserve =
    script_call({"ratelimit:{k}"}, encode_reserve(PermitRequest{}, milliseconds(0), 0));
const std::vector<std::string> kGiveBack =
    script_call({"ratelimit:{k}"}, encode_give_back(1, std::nullopt, 0));

// Each try of these tests is one send: what the policy decides is how many tries a request
// makes, how long they wait, and what the request ends with.
class RedisRetryPolicyTest : public ::testing::Test {
 protected:
  RetryPolicy policy(Deadline& deadline, bool resend_if_reply_lost,
                     RetryPolicy::Waits waits = RetryPolicy::Waits::restarts_and_failovers) {
    RetryPolicy retries(
        deadline, kTimeout, kFailoverTimeout, waits, [](const std::string&) {}, jitter_);
    retries.sending(resend_if_reply_lost ? kReserve : kGiveBack);
    return retries;
  }
  static FailingOver failing_over(bool may_have_run) {
    return FailingOver("the master hangs", "no master within 2s of a failover", "", may_have_run);
  }
  nanoseconds elapsed() { return clock_.now() - start_; }

  testing::FakeClock clock_;
  testing::FakeWaiter waiter_{clock_};
  nanoseconds start_ = clock_.now();
  std::minstd_rand jitter_{1};
};

// A failover is tried every 50 ms within the request's one budget, then the request gives up
// saying so.
TEST_F(RedisRetryPolicyTest, AFailoverIsTriedWithinTheRequestsOneBudget) {
  Deadline deadline(kTimeout, &waiter_);
  RetryPolicy retries = policy(deadline, true);
  try {
    retries.run([&]() -> int { throw failing_over(false); });
    FAIL() << "no failover ends";
  } catch (const FailingOver&) {
    FAIL() << "the failover's own error, not the budget's";
  } catch (const StoreUnavailable& error) {
    EXPECT_STREQ(error.what(), "no master within 2s of a failover");
  }
  EXPECT_GE(elapsed(), kFailoverTimeout);
  EXPECT_LE(elapsed(), kFailoverTimeout + kFailoverPause);
  EXPECT_EQ(retries.tries(), kFailoverTimeout / kFailoverPause + 1);
}

// A rate set or a give-back that may have run is not sent again through a failover: it would
// count twice. What may run twice is.
TEST_F(RedisRetryPolicyTest, WhatMayHaveRunIsSentAgainOnlyIfItMayRunTwice) {
  Deadline once(kTimeout, &waiter_);
  RetryPolicy not_again = policy(once, false);
  EXPECT_THROW(not_again.run([&]() -> int { throw failing_over(true); }), FailingOver);
  EXPECT_EQ(not_again.tries(), 1);
  EXPECT_EQ(elapsed(), nanoseconds::zero());

  Deadline twice(kTimeout, &waiter_);
  RetryPolicy again = policy(twice, true);
  int tries = 0;
  EXPECT_EQ(again.run([&] {
    if (++tries < 3) throw failing_over(true);
    return 7;
  }),
            7);
  EXPECT_EQ(again.tries(), 3);
}

// A lost reply is sent again once, at once; a second loss ends the request.
TEST_F(RedisRetryPolicyTest, ALostReplyIsSentAgainOnce) {
  Deadline deadline(kTimeout, &waiter_);
  RetryPolicy retries = policy(deadline, true);
  EXPECT_THROW(retries.run([&]() -> int { throw ConnectionLost("closed", true); }), ConnectionLost);
  EXPECT_EQ(retries.tries(), 2);
  EXPECT_EQ(elapsed(), nanoseconds::zero());
}

// A server that refuses is asked again until the request's own deadline (--timeout), not past
// it, however long the restart budget; the request ends with the refusal.
TEST_F(RedisRetryPolicyTest, TheRequestsOwnDeadlineEndsTheRestartWait) {
  Deadline deadline(kTimeout, &waiter_);
  deadline.refuse_after(clock_.now() + milliseconds(1000));
  RetryPolicy retries = policy(deadline, true);
  EXPECT_THROW(retries.run([&]() -> int {
    deadline.check("reply");
    throw ConnectionLost("Connection refused", false);
  }),
               ConnectionLost);
  EXPECT_EQ(elapsed(), milliseconds(1000));
  // At once, then pauses of 10-20 ms doubling up to 125-250 ms: a handful of tries, not 50.
  EXPECT_GE(retries.tries(), 5);
  EXPECT_LE(retries.tries(), 14);
}

// A restart and then a failover spend one budget: the restart's 5 s counts from the request's
// first trouble, whichever kind came first.
TEST_F(RedisRetryPolicyTest, ARestartAfterAFailoverHasNoBudgetOfItsOwn) {
  Deadline deadline(kTimeout, &waiter_);
  RetryPolicy retries = policy(deadline, true);
  EXPECT_THROW(retries.run([&]() -> int {
    // A failover for 1.9 s, then the server refuses (restarting).
    if (elapsed() < milliseconds(1900)) throw failing_over(false);
    throw ConnectionLost("Connection refused", false);
  }),
               ConnectionLost);
  EXPECT_GE(elapsed(), kRestartBudget);
  EXPECT_LE(elapsed(), kRestartBudget + kLongestRestartPause);
}

// The agent waits for failovers only: a restart goes back to its caller, whose policy waits.
TEST_F(RedisRetryPolicyTest, TheAgentLeavesARestartToItsCaller) {
  Deadline deadline(kTimeout, &waiter_);
  RetryPolicy retries = policy(deadline, true, RetryPolicy::Waits::failovers);
  EXPECT_THROW(retries.run([&]() -> int { throw ConnectionLost("Connection refused", false); }),
               ConnectionLost);
  EXPECT_EQ(retries.tries(), 1);
}

// A Cluster's redirects and a missing function: the command did not run, so it is sent again at
// once within the same deadline, even one that may not be sent twice; one MOVED, then one ASK, and
// one missing function per try that ran; a redirect more fails the request with the reply.
TEST_F(RedisRetryPolicyTest, WhatDidNotRunIsSentAgainAtOnceWithinTheSameDeadline) {
  Deadline deadline(kTimeout, &waiter_);
  const nanoseconds unavailable_at = deadline.unavailable_at();
  RetryPolicy retries = policy(deadline, false);
  int tries = 0;
  EXPECT_EQ(retries.run([&] {
    // Each round trip takes 10 ms: a deadline renewed would end later.
    clock_.advance(milliseconds(10));
    switch (++tries) {
      case 1:
        throw NotRun(NotRun::Reply::moved, "MOVED 1 127.0.0.1:7001");
      case 2:
        throw NotRun(NotRun::Reply::ask, "ASK 1 127.0.0.1:7002");
      case 3:
        throw NotRun(NotRun::Reply::function_missing, "ERR Function not found");
      default:
        return 7;
    }
  }),
            7);
  EXPECT_EQ(retries.tries(), 4);
  EXPECT_EQ(elapsed(), milliseconds(40)) << "a pause between the tries";
  EXPECT_EQ(deadline.unavailable_at(), unavailable_at) << "the deadline was renewed";

  for (const auto& [first, second] :
       {std::pair{NotRun::Reply::moved, NotRun::Reply::moved},
        std::pair{NotRun::Reply::ask, NotRun::Reply::moved},
        std::pair{NotRun::Reply::ask, NotRun::Reply::ask},
        std::pair{NotRun::Reply::function_missing, NotRun::Reply::function_missing}}) {
    Deadline again(kTimeout, &waiter_);
    RetryPolicy bounded = policy(again, true);
    int sent = 0;
    try {
      bounded.run([&]() -> int { throw NotRun(++sent == 1 ? first : second, "the second reply"); });
      FAIL() << "a redirect more was followed";
    } catch (const NotRun& error) {
      EXPECT_STREQ(error.what(), "the second reply");
    }
    EXPECT_EQ(bounded.tries(), 2);
  }
}

// A failover ends the try: the next may meet a MOVED (the promoted replica's node) or a missing
// function (a server without the library) anew, and follows it.
TEST_F(RedisRetryPolicyTest, ATryThatRanOpensTheCountOfRedirectsAgain) {
  Deadline deadline(kTimeout, &waiter_);
  RetryPolicy retries = policy(deadline, true);
  int tries = 0;
  EXPECT_EQ(retries.run([&] {
    switch (++tries) {
      case 1:
      case 3:
        throw NotRun(NotRun::Reply::moved, "MOVED 1 127.0.0.1:7001");
      case 2:
        throw failing_over(false);
      default:
        return 7;
    }
  }),
            7);
  EXPECT_EQ(retries.tries(), 4);
  EXPECT_EQ(elapsed(), kFailoverPause);
}

// Sentinels that name no master are asked again every 50 ms within the operation's one timeout
// (not renewed: no command went out), then the request fails saying so.
TEST_F(RedisRetryPolicyTest, SentinelsThatNameNoMasterAreAskedWithinTheTimeout) {
  Deadline deadline(kTimeout, &waiter_);
  RetryPolicy retries = policy(deadline, true);
  try {
    retries.run([&]() -> int { throw NoMasterNamed("no master 'cache' within 200ms"); });
    FAIL() << "the search never ends";
  } catch (const NoMasterNamed& error) {
    EXPECT_STREQ(error.what(), "no master 'cache' within 200ms");
  }
  EXPECT_EQ(elapsed(), kTimeout);
  // At 0, 50, 100 and 150 ms: none at 200 ms, which would ask nobody.
  EXPECT_EQ(retries.tries(), kTimeout / kFailoverPause);
}

// Whether a command that may have run is sent again comes from the command alone: the one the
// store sends and the agent relays (the same bytes) decide alike. A give-back and a rate set are
// not sent again; every other operation is.
TEST_F(RedisRetryPolicyTest, TheCommandSaysWhetherItMayBeSentAgain) {
  const std::vector<std::string> key{"ratelimit:{k}"};
  const std::vector<std::string> two_keys{"ratelimit:{k}", "ratelimit:{k}b"};
  PermitRequest request;
  request.key = "k";
  ThrottleRequest throttled;
  throttled.key = "k";
  struct Operation {
    std::string name;
    std::vector<std::string> keys;
    std::vector<std::string> arguments;
    bool again;
  };
  const std::vector<Operation> operations{
      {"reserve", key, encode_reserve(request, milliseconds(0), 0), true},
      {"reserve_all", two_keys, encode_reserve_all({request, request}, milliseconds(0), 0), true},
      {"status", key, encode_status(0), true},
      {"throttle", key, encode_throttle(throttled, 0), true},
      {"give_back", key, encode_give_back(1, std::nullopt, 0), false},
      {"set_rate", key, encode_set_rate(2.0, KeySchedule{}, 0, std::nullopt), false},
  };
  for (const auto& [name, keys, arguments, again] : operations) {
    const std::vector<std::string> command = script_call(keys, arguments);
    Deadline deadline(kTimeout, &waiter_);
    RetryPolicy retries(
        deadline, kTimeout, kFailoverTimeout, RetryPolicy::Waits::failovers,
        [](const std::string&) {}, jitter_);
    retries.sending(command);
    int tries = 0;
    try {
      retries.run([&] {
        if (++tries == 1) throw failing_over(true);
        return 7;
      });
    } catch (const FailingOver&) {
    }
    EXPECT_EQ(retries.tries(), again ? 2 : 1) << name;
  }
  // Not a script call: DEL twice deletes what DEL once did, and a library loaded twice is loaded.
  EXPECT_TRUE(may_send_again({"DEL", "ratelimit:{k}"}));
  EXPECT_TRUE(may_send_again(library_load()));
}

}  // namespace
}  // namespace ratelimit::stores::redis
