#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "io/waiter.hpp"

// The host agent (agent/, `ratelimit agent`) keeps a store's connections for every process of
// this user on the host. The stores say here what they need of it, without knowing how it is
// reached: a client's link to it, and what the agent runs for its clients.
namespace ratelimit::stores {

// How one exchange with the agent ended.
struct AgentAnswer {
  enum class Outcome {
    answered,
    // There is no agent and none could be started in time (or it is not this user's): the caller
    // goes to the store itself. Nothing was sent.
    no_agent,
    // The agent went away after the whole request had gone out: it may have acted on it.
    lost,
    // A stop signal (`signal`) ended the wait for the answer; it may have acted on the request.
    stopped,
    // No answer by the deadline; it may have acted on the request.
    too_late,
    // No sign of life within the liveness bound (stopped, hung): the caller goes to the store
    // itself. It may still act on the request.
    not_answering,
  };
  Outcome outcome = Outcome::no_agent;
  std::string answer{};
  int signal = 0;
};

// A client's link to the agent: a request out, its answer back.
class AgentLink {
 public:
  virtual ~AgentLink() = default;
  // Sends `request` (starting an agent if none runs) and waits through `waiter` for the answer
  // until `deadline` (the waiter's timeline) at most. An agent acts on a request only once it has
  // it whole, so a request that did not go out whole was not acted on. An agent slow to answer
  // (the store is) must show within each `liveness` that it runs, or it is not_answering.
  virtual AgentAnswer exchange(std::string_view request, std::chrono::nanoseconds deadline,
                               std::chrono::nanoseconds liveness, io::Waiter& waiter) = 0;
};

// What the agent runs for its clients: the stores' connections of one route (open_store.hpp:
// agent_route), kept between requests and between clients. Used by one thread at a time.
class AgentStores {
 public:
  // Answers request `index` (of those answer() was given) at once, before answer() returns: its
  // caller stops waiting before the others are answered. Its place in what answer() returns is
  // then not used.
  using AnswerNow = std::function<void(std::size_t index, std::string answer)>;

  virtual ~AgentStores() = default;
  // The answers to the requests that came (from one client or several), one each, in their
  // order. Requests for one store that come together go to it together, each as it would go
  // alone. Waits go through `waiter`: a stop signal it reports ends them, and the answers say the
  // agent was stopped. Never throws for what a store does: an answer carries it back to its
  // client, who treats it as it treats its own store's errors. Without `answer_now`, every
  // answer comes when answer() returns.
  virtual std::vector<std::string> answer(const std::vector<std::string>& requests,
                                          io::Waiter& waiter, const AnswerNow& answer_now = {}) = 0;
  // Connections kept open now, and the decisions made (requests answered by a store) so far.
  virtual std::size_t connections() const = 0;
  virtual std::uint64_t decisions() const = 0;
};

}  // namespace ratelimit::stores
