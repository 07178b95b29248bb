#include <gtest/gtest.h>

#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "stores/redis/redis_connection.hpp"
#include "stores/redis/redis_connection_transport.hpp"

namespace ratelimit::stores::redis {
namespace {

using std::chrono::milliseconds;

class RedisDeadlineTest : public ::testing::Test {
 protected:
  testing::FakeClock clock_;
  testing::FakeWaiter waiter_{clock_};
};

// A share of a search ends with its share, or with the search if that ends first.
TEST_F(RedisDeadlineTest, AShareNeverOutlastsTheSearch) {
  Deadline search(milliseconds(1000), &waiter_);
  Deadline share = search.share(milliseconds(250));
  clock_.advance(milliseconds(249));
  EXPECT_FALSE(share.passed());
  clock_.advance(milliseconds(1));
  EXPECT_TRUE(share.passed());
  EXPECT_THROW(share.check("reply"), Failure);
  EXPECT_FALSE(search.passed());
  clock_.advance(milliseconds(650));
  const Deadline last = search.share(milliseconds(250));
  clock_.advance(milliseconds(100));
  EXPECT_TRUE(last.passed());
  EXPECT_TRUE(search.passed());
}

// Renewed for a failover, a deadline lasts its new timeout, past the old one's end.
TEST_F(RedisDeadlineTest, ARenewedDeadlineLastsItsOwnTimeout) {
  Deadline operation(milliseconds(1000), &waiter_);
  clock_.advance(milliseconds(900));
  const Deadline failover = operation.renewed(milliseconds(60000));
  clock_.advance(milliseconds(59999));
  EXPECT_TRUE(operation.passed());
  EXPECT_FALSE(failover.passed());
}

// --try and --timeout still refuse in time, through a renewal and a share.
TEST_F(RedisDeadlineTest, TheRequestsOwnDeadlineIsKept) {
  Deadline operation(milliseconds(1000), &waiter_);
  operation.refuse_after(clock_.now() + milliseconds(50));
  Deadline failover = operation.renewed(milliseconds(60000));
  Deadline share = failover.share(milliseconds(250));
  clock_.advance(milliseconds(50));
  EXPECT_THROW(failover.check("reply"), TooLate);
  EXPECT_THROW(share.check("reply"), TooLate);
}

// A request has one failover budget, counted from the first time one of its deadlines asked for
// it: connecting and then sending, or trying again after a restart, do not open a second one.
TEST_F(RedisDeadlineTest, ARequestHasOneFailoverBudget) {
  Deadline operation(milliseconds(1000), &waiter_);
  const Deadline copied_before = operation;
  const Deadline connecting = operation.failover_budget(milliseconds(2000));
  clock_.advance(milliseconds(1500));
  const Deadline sending =
      copied_before.renewed(milliseconds(1000)).failover_budget(milliseconds(2000));
  const Deadline step = operation.share(milliseconds(250)).failover_budget(milliseconds(2000));
  clock_.advance(milliseconds(499));
  EXPECT_FALSE(sending.passed());
  clock_.advance(milliseconds(1));
  EXPECT_TRUE(connecting.passed());
  EXPECT_TRUE(sending.passed());
  EXPECT_TRUE(step.passed());
  // Another request has its own.
  const Deadline other(milliseconds(1000), &waiter_);
  EXPECT_FALSE(other.failover_budget(milliseconds(2000)).passed());
}

}  // namespace
}  // namespace ratelimit::stores::redis
