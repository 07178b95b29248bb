#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "io/posix.hpp"
#include "io/waiter.hpp"
#include "stores/agent_link.hpp"

// The host agent: one process per user and state directory that keeps the shared store's
// connections (TLS sessions included) for every ratelimit process of the user on the host, so
// that a decision of `exec` or `acquire` costs the store a script call, not a connection. Started
// on demand by the first process that needs it, ended after an idle time. Its socket is
// `agent.sock` in the checked state directory (0600), `agent.lock` holds its pid.
namespace ratelimit::agent {

inline constexpr std::chrono::seconds kDefaultIdle{60};

// A process's link to the agent of `state_dir`: connects at the first exchange, starting an agent
// if none runs (when `start` says so). An agent that cannot be reached in time, a socket that is
// not this user's or a directory that is not safe: no agent (the caller goes direct), from then on.
class AgentClient final : public stores::AgentLink {
 public:
  explicit AgentClient(std::string state_dir, bool start = true)
      : state_dir_(std::move(state_dir)), start_(start) {}

  // Whenever `liveness` passes without the answer, the agent is asked on a connection of its own
  // whether it runs: its main thread answers that at once, however long the store takes.
  // nanoseconds::max(): never asked.
  stores::AgentAnswer exchange(std::string_view request, std::chrono::nanoseconds deadline,
                               std::chrono::nanoseconds liveness, io::Waiter& waiter) override;

 private:
  // Connected to an agent (one started if none runs) by `deadline`; false if not.
  bool connect(std::chrono::nanoseconds deadline, io::Waiter& waiter);
  // Whether the agent answers a request of its own (kStatusRequest) on a new connection by
  // `deadline`: it runs, it is not stopped or stuck.
  bool runs(std::chrono::nanoseconds deadline, io::Waiter& waiter) const;

  std::string state_dir_;
  bool start_;
  bool started_ = false;
  bool given_up_ = false;
  io::FileDescriptor socket_;
};

// What a running agent says of itself.
struct AgentReport {
  long pid = 0;
  std::size_t connections = 0;
  std::uint64_t decisions = 0;
};

// The agent of `state_dir`, if one runs and answers within a second; none is started.
std::optional<AgentReport> ask_agent(const std::string& state_dir);

// Runs the agent of `state_dir` until it has had no request for `idle` or a stop signal comes
// (SIGTERM, SIGINT, SIGHUP); returns at once if another agent serves the directory. Throws as
// state::StateDirectory::open for an unsafe directory, std::system_error when the socket cannot be
// made.
void run_agent(const std::string& state_dir, std::chrono::nanoseconds idle);

}  // namespace ratelimit::agent
