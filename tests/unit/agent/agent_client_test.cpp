#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "agent/agent.hpp"
#include "agent/agent_protocol.hpp"
#include "fake_clock.hpp"
#include "fake_waiter.hpp"
#include "temp_dir.hpp"

namespace ratelimit::agent {
namespace {

using namespace std::chrono_literals;

// Without a running agent, and told not to start one, a client goes to the store itself: nothing
// was sent, and nothing is left behind in the state directory.
TEST(AgentClient, WithoutAnAgentTheCallerGoesDirect) {
  testing::TempDir state;
  testing::FakeClock clock;
  testing::FakeWaiter waiter(clock);
  AgentClient client(state.string(), false);
  const stores::AgentAnswer answer =
      client.exchange("a request", clock.now() + 1s, std::chrono::nanoseconds::max(), waiter);
  EXPECT_EQ(answer.outcome, stores::AgentAnswer::Outcome::no_agent);
  EXPECT_TRUE(answer.answer.empty());
  EXPECT_FALSE(std::filesystem::exists(state.path() / kSocketName));
  // And from then on, without trying again.
  EXPECT_EQ(
      client.exchange("again", clock.now() + 1s, std::chrono::nanoseconds::max(), waiter).outcome,
      stores::AgentAnswer::Outcome::no_agent);
}

TEST(AgentClient, AskingAboutAnAgentStartsNone) {
  testing::TempDir state;
  EXPECT_FALSE(ask_agent(state.string()).has_value());
  EXPECT_FALSE(std::filesystem::exists(state.path() / kSocketName));
}

}  // namespace
}  // namespace ratelimit::agent
