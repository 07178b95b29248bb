#include "stores/redis/redis_topology.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "errors.hpp"
#include "format/quantities.hpp"
#include "stores/redis/redis_options.hpp"
#include "stores/redis/redis_retry_policy.hpp"

namespace ratelimit::stores::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

std::optional<int> port_number(std::string_view text) {
  int port = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || port < 1 ||
      port > 65535)
    return std::nullopt;
  return port;
}

// A Cluster's `MOVED SLOT HOST:PORT` or `ASK SLOT HOST:PORT`; an empty host is the node that
// answered.
struct Redirect {
  bool ask = false;
  std::string slot;
  Address node;
};

std::optional<Redirect> redirect_of(const Value& reply, const Address& answered) {
  if (reply.type != Value::Type::error) return std::nullopt;
  const std::string_view text = reply.text;
  const bool ask = text.starts_with("ASK ");
  if (!ask && !text.starts_with("MOVED ")) return std::nullopt;
  const std::size_t slot_begin = text.find(' ') + 1;
  const std::size_t slot_end = text.find(' ', slot_begin);
  if (slot_end == std::string_view::npos) return std::nullopt;
  const std::string_view host_port = text.substr(slot_end + 1);
  const std::size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port = port_number(host_port.substr(colon + 1));
  if (!port) return std::nullopt;
  std::string host(host_port.substr(0, colon));
  if (host.empty()) host = answered.host;
  return Redirect{.ask = ask,
                  .slot = std::string(text.substr(slot_begin, slot_end - slot_begin)),
                  .node = node_address(answered, host, *port)};
}

}  // namespace

Topology::Topology(Settings settings, Notify notify, Notify warn)
    : deployment_(std::move(settings.deployment)),
      timeout_(settings.timeout),
      failover_timeout_(settings.failover_timeout),
      notify_(std::move(notify)),
      warn_(std::move(warn)),
      tls_options_(std::move(settings.tls)),
      sentinel_share_(timeout_ / static_cast<int>(deployment_.sentinels.size() + 1)),
      master_share_(timeout_ / 2) {}

const Tls* Topology::tls_for(const Address& node) {
  if (!node.tls) return nullptr;
  if (!tls_) tls_.emplace(tls_options_, notify_);
  return &*tls_;
}

Value Topology::command(const std::string& redis_key, const std::vector<std::string>& arguments,
                        Deadline& deadline) {
  RetryPolicy policy(deadline, timeout_, failover_timeout_, RetryPolicy::Waits::failovers, notify_,
                     jitter_);
  policy.sending(arguments);
  return policy.run([&] { return command_once(redis_key, arguments, deadline); });
}

Value Topology::command_once(const std::string& redis_key,
                             const std::vector<std::string>& arguments, Deadline& deadline) {
  if (deployment_.kind == Deployment::Kind::sentinel) return command_on_master(arguments, deadline);
  return command_in_cluster(redis_key, arguments, deadline);
}

std::optional<std::vector<Value>> Topology::pipeline(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& commands,
    Deadline& deadline) {
  if (deployment_.kind == Deployment::Kind::sentinel) return std::nullopt;
  std::vector<std::vector<std::string>> arguments;
  for (const auto& [redis_key, command_arguments] : commands) {
    if (key_nodes_.contains(redis_key)) return std::nullopt;
    arguments.push_back(command_arguments);
  }
  return node_connection(deployment_.node, deadline).pipeline(arguments, deadline);
}

bool Topology::sent_elsewhere(const Value& reply) {
  return reply.type == Value::Type::error &&
         (reply.text.starts_with("MOVED ") || reply.text.starts_with("ASK ") ||
          reply.text.starts_with("CLUSTERDOWN") || reply.text.starts_with("TRYAGAIN"));
}

void Topology::connect(const std::string& redis_key, Deadline& deadline) {
  if (deployment_.kind == Deployment::Kind::sentinel) {
    Deadline failover = deadline.failover_budget(failover_timeout_);
    master(deadline, failover, false);
    return;
  }
  const auto moved_before = key_nodes_.find(redis_key);
  if (moved_before != key_nodes_.end()) {
    try {
      node_connection(moved_before->second, deadline);
      return;
    } catch (const StoreUnavailable&) {
      // Failing over, perhaps: the seed node says where the slot is now (command_in_cluster).
      key_nodes_.erase(moved_before);
    }
  }
  node_connection(deployment_.node, deadline);
}

Connection& Topology::node_connection(const Address& node, Deadline& deadline) {
  // After a failure the next call connects again: a new request, never a retry of the lost one.
  const auto kept = nodes_.find(node.shown);
  if (kept != nodes_.end() && kept->second.open()) return kept->second;
  Connection connection(node, tls_for(node), deadline);
  return nodes_.insert_or_assign(node.shown, std::move(connection)).first->second;
}

Value Topology::command_in_cluster(const std::string& redis_key,
                                   const std::vector<std::string>& arguments, Deadline& deadline) {
  std::string cause;
  bool may_have_run = false;
  try {
    Value reply = command_following_redirect(redis_key, arguments, deadline);
    if (cluster_failing_over_) {
      cluster_failing_over_ = false;
      last_failover_ = deadline.waiter().now();
    }
    // The Cluster lost a master and has not promoted its replica yet: the command did not run.
    if (reply.type != Value::Type::error ||
        !(reply.text.starts_with("CLUSTERDOWN") || reply.text.starts_with("TRYAGAIN")))
      return reply;
    cause = reply.text;
  } catch (const NotRun&) {
    throw;
  } catch (const StoreUnavailable& error) {
    // A node that a MOVED named is lost or hangs: it may be failing over, and the seed node
    // will name its replica once promoted. What it booked may be booked again: the key may pay
    // twice. The seed node itself lost is an outage.
    const auto moved_before = key_nodes_.find(redis_key);
    if (moved_before == key_nodes_.end()) throw;
    key_nodes_.erase(moved_before);
    cause = error.what();
    const auto* lost = dynamic_cast<const ConnectionLost*>(&error);
    may_have_run = lost == nullptr || lost->sent();
  }
  cluster_failing_over_ = true;
  last_failover_ = deadline.waiter().now();
  throw FailingOver(
      cause,
      fmt::format("Redis at {}: no answer for {} within {} of a failover ({}); raise {} above "
                  "cluster-node-timeout plus the election",
                  deployment_.shown, redis_key, format::human_duration(failover_timeout_), cause,
                  kFailoverTimeoutOption),
      fmt::format("Redis Cluster: {}; asking the Cluster again", cause), may_have_run);
}

Value Topology::command_following_redirect(const std::string& redis_key,
                                           const std::vector<std::string>& arguments,
                                           Deadline& deadline) {
  Redirected& redirected = redirected_[redis_key];
  const auto moved_before = key_nodes_.find(redis_key);
  // ASK is for the next command only; MOVED holds until another.
  const std::optional<Address> asked = std::exchange(redirected.asked, std::nullopt);
  const Address node = asked                              ? *asked
                       : moved_before != key_nodes_.end() ? moved_before->second
                                                          : deployment_.node;
  std::optional<Redirect> redirect;
  Value reply;
  try {
    Connection& connection = node_connection(node, deadline);
    if (asked) {
      const Value asking = connection.command({"ASKING"}, deadline);
      if (asking.type == Value::Type::error) {
        redirected_.erase(redis_key);
        return asking;
      }
    }
    reply = connection.command(arguments, deadline);
    redirect = redirect_of(reply, node);
  } catch (...) {
    redirected_.erase(redis_key);
    throw;
  }
  if (!redirect) {
    // Answered: the redirects followed are said under --verbose, each once.
    if (!redirected.followed.empty()) {
      std::string said = fmt::format("Redis Cluster: {} answered by {} after {}", redis_key,
                                     node.shown, fmt::join(redirected.followed, ", "));
      if (redirects_said_.insert(said).second) notify_(said);
    }
    redirected_.erase(redis_key);
    return reply;
  }
  redirected.followed.push_back(
      fmt::format("{} {} from {}", redirect->ask ? "ASK" : "MOVED", redirect->slot, node.shown));
  if (redirect->ask)
    redirected.asked = redirect->node;
  else
    key_nodes_.insert_or_assign(redis_key, redirect->node);
  // The request's RetryPolicy sends it again there, or fails with the reply.
  throw NotRun(redirect->ask ? NotRun::Reply::ask : NotRun::Reply::moved,
               fmt::format("Redis at {}: {}", deployment_.shown, reply.text));
}

Connection& Topology::master(Deadline& deadline, Deadline& failover, bool after_loss) {
  if (!master_ || !master_->open()) {
    // Before the sentinels are asked: a TLS file that cannot be used is said whatever they answer.
    tls_for(deployment_.node);
    master_.emplace(find_master(deadline, failover, after_loss));
  }
  return *master_;
}

Value Topology::command_on_master(const std::vector<std::string>& arguments, Deadline& deadline) {
  // The request's one budget, whichever way the failover shows and whether connect met it first.
  Deadline failover = deadline.failover_budget(failover_timeout_);
  Connection& connection = master(deadline, failover, master_lost_);
  std::string cause;
  bool may_have_run = false;
  try {
    Value reply = connection.command(arguments, deadline);
    if (master_lost_) {
      master_lost_ = false;
      last_failover_ = deadline.waiter().now();
    }
    if (reply.type != Value::Type::error) return reply;
    if (reply.text.starts_with("READONLY")) {
      cause = fmt::format("{} is no longer the master of '{}' (READONLY)", master_shown_,
                          deployment_.master_name);
    } else if (reply.text.starts_with("NOREPLICAS")) {
      // min-replicas-to-write: a master cut off from its replicas, perhaps replaced already.
      cause = fmt::format("{}: {}", master_shown_, reply.text);
    } else {
      return reply;
    }
    notify_("Redis Sentinel: " + cause);
  } catch (const StoreUnavailable& error) {
    // Lost, or no answer within the deadline: the master went away or hangs. What it booked is
    // on the new master only if it was replicated (and a master that was only slow may book it
    // yet): sent again, the key may pay twice.
    cause = error.what();
    const auto* lost = dynamic_cast<const ConnectionLost*>(&error);
    may_have_run = lost == nullptr || lost->sent();
    notify_(cause + "; asking the sentinels for the master");
  }
  master_.reset();
  master_lost_ = true;
  last_failover_ = deadline.waiter().now();
  throw FailingOver(cause, failover_too_long(cause), "", may_have_run);
}

std::optional<Address> Topology::ask_sentinel(const Address& sentinel, Deadline& deadline,
                                              std::string& cause) {
  const std::string& name = deployment_.master_name;
  Connection asked(sentinel, nullptr, deadline);
  const Value reply = asked.command({"SENTINEL", "get-master-addr-by-name", name}, deadline);
  if (reply.type != Value::Type::array || reply.elements.size() != 2 ||
      !is_text(reply.elements[0]) || !is_text(reply.elements[1]) ||
      !port_number(reply.elements[1].text)) {
    cause = reply.type == Value::Type::nil
                ? fmt::format("{} knows no master '{}'", sentinel.shown, name)
                : fmt::format("{}: {}", sentinel.shown,
                              reply.type == Value::Type::error ? reply.text
                                                               : std::string("unexpected reply"));
    return std::nullopt;
  }
  return node_address(deployment_.node, reply.elements[0].text,
                      *port_number(reply.elements[1].text));
}

Connection Topology::find_master(Deadline& outage, Deadline& failover, bool after_loss) {
  const std::string& name = deployment_.master_name;
  const std::size_t count = deployment_.sentinels.size();
  std::string last_cause = "no sentinel answered";
  bool failing_over = false;
  // A master that several sentinels name is asked once.
  std::vector<std::string> masters_asked;
  for (std::size_t turn = 0; turn < count; ++turn) {
    Deadline& search = failing_over ? failover : outage;
    if (search.passed()) break;
    const std::size_t index = (first_sentinel_ + turn) % count;
    std::optional<Address> named;
    try {
      Deadline step = search.share(sentinel_share_);
      named = ask_sentinel(deployment_.sentinels[index], step, last_cause);
    } catch (const StoreUnavailable& error) {
      last_cause = error.what();
    }
    if (!named ||
        std::find(masters_asked.begin(), masters_asked.end(), named->shown) != masters_asked.end())
      continue;
    masters_asked.push_back(named->shown);
    try {
      Deadline step = search.share(master_share_);
      Connection candidate(*named, tls_for(*named), step);
      const Value role = candidate.command({"ROLE"}, step);
      if (role.type == Value::Type::error) {
        // It answers, and refuses: no failover mends that.
        last_cause = fmt::format("{}: ROLE: {}", named->shown, role.text);
        continue;
      }
      if (role.type != Value::Type::array || role.elements.empty() ||
          role.elements[0].text != "master") {
        last_cause = fmt::format("{} is not a master (yet)", named->shown);
        failing_over = true;
        continue;
      }
      if (named->shown != master_shown_)
        notify_(fmt::format("Redis Sentinel: the master of '{}' is {}", name, named->shown));
      master_shown_ = named->shown;
      first_sentinel_ = index;
      if (failing_over) outage = outage.renewed(timeout_);
      if (failing_over || after_loss) look_for_a_second_master(outage);
      return candidate;
    } catch (const Refused& refused) {
      last_cause = refused.what();
    } catch (const StoreUnavailable& error) {
      last_cause = error.what();
      failing_over = true;
    }
  }
  // The request's retry policy waits for the failover, or for a sentinel that names a master,
  // and asks again.
  if (failing_over) throw FailingOver(last_cause, failover_too_long(last_cause), "", false);
  throw NoMasterNamed(fmt::format("Redis at {}: no master '{}' within {}ms ({})", deployment_.shown,
                                  name, timeout_.count(), last_cause));
}

void Topology::look_for_a_second_master(const Deadline& request) {
  if (warned_of_two_masters_) return;
  const std::size_t count = deployment_.sentinels.size();
  // A --redis-timeout of its own, the request's bound kept.
  const Deadline deadline = request.renewed(timeout_);
  const std::string& master = master_shown_;
  std::vector<std::string> masters_asked{master};
  for (std::size_t turn = 1; turn < count; ++turn) {
    const Address& sentinel = deployment_.sentinels[(first_sentinel_ + turn) % count];
    try {
      std::string cause;
      Deadline step = deadline.share(sentinel_share_);
      const std::optional<Address> named = ask_sentinel(sentinel, step, cause);
      if (!named || std::find(masters_asked.begin(), masters_asked.end(), named->shown) !=
                        masters_asked.end())
        continue;
      masters_asked.push_back(named->shown);
      step = deadline.share(master_share_);
      Connection other(*named, tls_for(*named), step);
      const Value role = other.command({"ROLE"}, step);
      if (role.type == Value::Type::array && !role.elements.empty() &&
          role.elements[0].text == "master") {
        warn_(fmt::format(
            "Redis Sentinel: {} and {} both say they are the master of '{}' ({} names {}): a "
            "split brain; until one is demoted, each grants the key's rate",
            master, named->shown, deployment_.master_name, sentinel.shown, named->shown));
        warned_of_two_masters_ = true;
        return;
      }
    } catch (const StoreUnavailable&) {
      // A sentinel or master that cannot say is no second master.
    }
  }
}

std::string Topology::failover_too_long(const std::string& cause) const {
  return (fmt::format(
      "Redis at {}: no master '{}' within {} of a failover ({}); raise {} above the sentinels' "
      "down-after-milliseconds plus the election",
      deployment_.shown, deployment_.master_name, format::human_duration(failover_timeout_), cause,
      kFailoverTimeoutOption));
}

void Topology::for_each_master(Deadline& deadline, const std::function<void(Connection&)>& visit) {
  if (deployment_.kind == Deployment::Kind::sentinel) {
    Deadline failover = deadline.failover_budget(failover_timeout_);
    visit(master(deadline, failover, false));
    return;
  }
  Connection& server = node_connection(deployment_.node, deadline);
  const Value slots = server.command({"CLUSTER", "SLOTS"}, deadline);
  // Not a Cluster: "ERR This instance has cluster support disabled".
  if (slots.type != Value::Type::array) {
    visit(server);
    return;
  }
  // {first slot, last slot, {host, port, id...} of the master, replicas...} per range.
  std::vector<Address> masters;
  for (const Value& range : slots.elements) {
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) continue;
    const Value& master = range.elements[2];
    const std::string host =
        master.elements[0].text.empty() ? deployment_.node.host : master.elements[0].text;
    Address address =
        node_address(deployment_.node, host, static_cast<int>(master.elements[1].integer));
    if (std::none_of(masters.begin(), masters.end(),
                     [&](const Address& known) { return known.shown == address.shown; }))
      masters.push_back(std::move(address));
  }
  for (const Address& master : masters) visit(node_connection(master, deadline));
}

}  // namespace ratelimit::stores::redis
