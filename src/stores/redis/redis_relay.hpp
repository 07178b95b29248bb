#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stores/agent_link.hpp"
#include "stores/redis/redis_connection.hpp"
#include "stores/redis/redis_settings.hpp"
#include "stores/redis/redis_topology.hpp"

// Redis commands relayed through the host agent: the client sends the very command it would send
// to the server (the script call with its arguments), with its deployment and deadline; the agent
// sends it on the connection it keeps to that deployment and hands the reply back. Every decision
// is the one the direct path would make: the same script, the same arguments, the server's clock.
namespace ratelimit::stores::redis {

// The client's side: a command for `redis_key`, sent through the agent.
class RelayClient {
 public:
  // Told what the agent said while serving a request, as Topology tells it: `notify` its
  // --verbose notes, `warn` its warnings.
  using Notify = std::function<void(const std::string&)>;

  // Every request carries `settings` (the URL with its password): the agent keys its
  // connections by all of them, so that two clients share one only when all are the same.
  // Relative TLS file names go with this process's working directory: the agent runs in /.
  RelayClient(
      std::shared_ptr<AgentLink> link, const Settings& settings,
      Notify notify = [](const std::string&) {}, Notify warn = [](const std::string&) {});

  // The reply, as Topology::command gives it, or throws as it does (ConnectionLost with
  // sent() when the agent went away after the request went out whole), after telling what was
  // said while it was served; never Failure (StoreUnavailable instead). Nothing when there
  // is no agent (or one that does not understand this client): nothing was sent, go direct.
  // Nothing too when the agent showed no sign of life within a tenth of the timeout (stopped,
  // stuck): it may still act on the request, and the caller goes direct, its own deadline
  // (refuse_after) put off by the time spent on the agent.
  std::optional<Value> command(const std::string& redis_key,
                               const std::vector<std::string>& arguments, Deadline& deadline);

 private:
  std::shared_ptr<AgentLink> link_;
  // The deployment's part of every request: its first fields.
  std::vector<std::string> deployment_fields_;
  std::string shown_url_;
  // How soon the agent must show that it runs (AgentLink::exchange).
  std::chrono::nanoseconds liveness_;
  std::chrono::milliseconds failover_timeout_;
  Notify notify_;
  Notify warn_;

  // Tells the notes and warnings of an answer's array of them.
  void tell_said(const Value& said) const;
};

// The agent's side: one Topology per deployment, kept until the agent ends.
// Requests for one deployment that come together go out in one write (a pipeline), in the order
// they came, so that each gets the decision it would get alone. Calls of the bucket script on one
// key among them go as one call of the script's batch operation, in the first one's place, which
// serves them in turn and gives each its own reply; any other command on the key begins a new
// batch after it.
class Relay final : public AgentStores {
 public:
  // TLS sessions are kept in `session_dir` (none: not kept).
  explicit Relay(std::string session_dir = {}) : session_dir_(std::move(session_dir)) {}
  // Its deployments tell it what they say (said_): it stays where it was made.
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // The deployment that `request` is for, as the agent routes it: each deployment is served on
  // its own, so that one that hangs holds up its own requests alone. Empty for a request of
  // another form (answered "unsupported").
  static std::string route(std::string_view request);

  // A batch sent in one write is waited for until its last caller's timeout; each caller whose
  // timeout comes sooner is answered at its own (answer_now), as a server that does not reply
  // would answer it alone.
  std::vector<std::string> answer(const std::vector<std::string>& requests, io::Waiter& waiter,
                                  const AnswerNow& answer_now = {}) override;
  std::size_t connections() const override { return deployments_.size(); }
  std::uint64_t decisions() const override { return decisions_; }

  struct Request;

 private:
  // The deployment's topology, made at its first request; what it says is kept in said_.
  Topology& deployment(const Request& request);
  // When `request`'s caller stops waiting for it: at the end of its --redis-timeout, counted from
  // when the caller began (a request that waited behind one to a hung server has that much less),
  // or of the failover timeout after it once its deployment met a failover since then, as the
  // caller waits for the agent (RelayClient::command) and the direct path for a failover.
  std::chrono::nanoseconds unavailable_at(const Request& request) const;
  // One request on its own, on the deployment's connection; its answer carries `said_before` and
  // what was said while serving it.
  std::string answer_alone(const Request& request, io::Waiter& waiter,
                           const std::vector<std::string>& said_before);
  // Answers `requests` (of `parsed`) with the reply to the command sent for them: theirs, or each
  // its own of a batch's; as answer_alone() where it did not run. `server` names the deployment.
  void answer_command(const std::vector<Request>& parsed, const std::vector<std::size_t>& requests,
                      Value reply, std::string_view server, io::Waiter& waiter,
                      const std::vector<std::string>& said, std::vector<std::string>& answers);
  // The answer that carries `reply` back, and `said`; a script's reply (not an error) is a
  // decision served.
  std::string reply_answer(const Request& request, const Value& reply,
                           const std::vector<std::string>& said);

  std::string session_dir_;
  std::map<std::string, Topology, std::less<>> deployments_;
  std::uint64_t decisions_ = 0;
  // What the deployments said since the answer being made was begun: kind ("note", "warning")
  // and text in turn.
  std::vector<std::string> said_;
};

}  // namespace ratelimit::stores::redis
