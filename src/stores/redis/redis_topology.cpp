#include "stores/redis/redis_topology.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "errors.hpp"
#include "format/quantities.hpp"
#include "stores/redis/redis_options.hpp"

namespace ratelimit::stores::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

// Between two rounds of asking the sentinels, or the Cluster, while a failover is under way.
constexpr milliseconds kFailoverPause{50};

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
  RedisAddress node;
};

std::optional<Redirect> redirect_of(const RedisValue& reply, const RedisAddress& answered) {
  if (reply.type != RedisValue::Type::error) return std::nullopt;
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

RedisTopology::RedisTopology(RedisDeployment deployment, milliseconds timeout,
                             milliseconds failover_timeout, Notify notify, Notify warn,
                             const RedisTlsOptions& tls)
    : deployment_(std::move(deployment)),
      timeout_(timeout),
      failover_timeout_(failover_timeout),
      notify_(std::move(notify)),
      warn_(std::move(warn)),
      tls_options_(tls),
      sentinel_share_(timeout / static_cast<int>(deployment_.sentinels.size() + 1)),
      master_share_(timeout / 2) {
  if (!deployment_.node.tls &&
      (!tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() || !tls.verify))
    throw UsageError(fmt::format("the {} options need a rediss:// URL, not '{}'", kAnyTlsOption,
                                 deployment_.shown));
}

const RedisTls* RedisTopology::tls_for(const RedisAddress& node) {
  if (!node.tls) return nullptr;
  if (!tls_) tls_.emplace(tls_options_, notify_);
  return &*tls_;
}

RedisValue RedisTopology::command(const std::string& redis_key,
                                  const std::vector<std::string>& arguments,
                                  RedisDeadline& deadline) {
  if (deployment_.kind == RedisDeployment::Kind::sentinel)
    return command_on_master(arguments, deadline);
  return command_in_cluster(redis_key, arguments, deadline);
}

std::optional<std::vector<RedisValue>> RedisTopology::pipeline(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& commands,
    RedisDeadline& deadline) {
  if (deployment_.kind == RedisDeployment::Kind::sentinel) return std::nullopt;
  std::vector<std::vector<std::string>> arguments;
  for (const auto& [redis_key, command_arguments] : commands) {
    if (key_nodes_.contains(redis_key)) return std::nullopt;
    arguments.push_back(command_arguments);
  }
  return node_connection(deployment_.node, deadline).pipeline(arguments, deadline);
}

bool RedisTopology::sent_elsewhere(const RedisValue& reply) {
  return reply.type == RedisValue::Type::error &&
         (reply.text.starts_with("MOVED ") || reply.text.starts_with("ASK ") ||
          reply.text.starts_with("CLUSTERDOWN") || reply.text.starts_with("TRYAGAIN"));
}

void RedisTopology::connect(const std::string& redis_key, RedisDeadline& deadline) {
  if (deployment_.kind == RedisDeployment::Kind::sentinel) {
    RedisDeadline failover = deadline.failover_budget(failover_timeout_);
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

RedisConnection& RedisTopology::node_connection(const RedisAddress& node, RedisDeadline& deadline) {
  // After a failure the next call connects again: a new request, never a retry of the lost one.
  const auto kept = nodes_.find(node.shown);
  if (kept != nodes_.end() && kept->second.open()) return kept->second;
  RedisConnection connection(node, tls_for(node), deadline);
  return nodes_.insert_or_assign(node.shown, std::move(connection)).first->second;
}

RedisValue RedisTopology::command_in_cluster(const std::string& redis_key,
                                             const std::vector<std::string>& arguments,
                                             RedisDeadline& deadline) {
  RedisDeadline failover = deadline.failover_budget(failover_timeout_);
  RedisDeadline attempt = deadline;
  bool told = false;
  while (true) {
    std::string cause;
    try {
      RedisValue reply = command_following_redirects(redis_key, arguments, attempt);
      // As command_on_master: what follows has the timeout of the node that answered.
      deadline = attempt;
      if (told) last_failover_ = deadline.waiter().now();
      // The Cluster lost a master and has not promoted its replica yet: the command did not run.
      if (reply.type != RedisValue::Type::error ||
          !(reply.text.starts_with("CLUSTERDOWN") || reply.text.starts_with("TRYAGAIN")))
        return reply;
      cause = reply.text;
    } catch (const StoreUnavailable& error) {
      // A node that a MOVED named is lost or hangs: it may be failing over, and the seed node
      // will name its replica once promoted. What it booked may be booked again: the key may pay
      // twice. The seed node itself lost is an outage.
      const auto moved_before = key_nodes_.find(redis_key);
      if (moved_before == key_nodes_.end()) throw;
      key_nodes_.erase(moved_before);
      cause = error.what();
    }
    if (failover.passed())
      throw StoreUnavailable(
          fmt::format("Redis at {}: no answer for {} within {} of a failover ({}); raise {} above "
                      "cluster-node-timeout plus the election",
                      deployment_.shown, redis_key, format::human_duration(failover_timeout_),
                      cause, kFailoverTimeoutOption));
    if (!told) notify_(fmt::format("Redis Cluster: {}; asking the Cluster again", cause));
    told = true;
    last_failover_ = deadline.waiter().now();
    failover.pause(kFailoverPause);
    attempt = deadline.renewed(timeout_);
  }
}

RedisValue RedisTopology::command_following_redirects(const std::string& redis_key,
                                                      const std::vector<std::string>& arguments,
                                                      RedisDeadline& deadline) {
  const auto moved_before = key_nodes_.find(redis_key);
  RedisAddress node = moved_before != key_nodes_.end() ? moved_before->second : deployment_.node;
  // What the redirects said, shown under --verbose once the command is answered.
  std::vector<std::string> followed;
  bool moved = false;
  bool asked = false;
  while (true) {
    RedisConnection& connection = node_connection(node, deadline);
    if (asked) {
      const RedisValue asking = connection.command({"ASKING"}, deadline);
      if (asking.type == RedisValue::Type::error) return asking;
    }
    RedisValue reply = connection.command(arguments, deadline);
    std::optional<Redirect> redirect = redirect_of(reply, node);
    // One MOVED (the slot has another master) and then one ASK (it is being migrated) at most:
    // a redirect more is returned, and reported as the error it is.
    if (!redirect || (redirect->ask ? asked : moved || asked)) {
      if (!followed.empty()) {
        std::string said = fmt::format("Redis Cluster: {} answered by {} after {}", redis_key,
                                       node.shown, fmt::join(followed, ", "));
        if (redirects_said_.insert(said).second) notify_(said);
      }
      return reply;
    }
    followed.push_back(
        fmt::format("{} {} from {}", redirect->ask ? "ASK" : "MOVED", redirect->slot, node.shown));
    node = redirect->node;
    (redirect->ask ? asked : moved) = true;
    // ASK is for this command only; MOVED holds until the next one.
    if (!redirect->ask) key_nodes_.insert_or_assign(redis_key, node);
  }
}

RedisConnection& RedisTopology::master(RedisDeadline& deadline, RedisDeadline& failover,
                                       bool after_loss) {
  if (!master_ || !master_->open()) {
    // Before the sentinels are asked: a TLS file that cannot be used is said whatever they answer.
    tls_for(deployment_.node);
    master_.emplace(find_master(deadline, failover, after_loss));
  }
  return *master_;
}

RedisValue RedisTopology::command_on_master(const std::vector<std::string>& arguments,
                                            RedisDeadline& deadline) {
  // The request's one budget, whichever way the failover shows and whether connect met it first.
  RedisDeadline failover = deadline.failover_budget(failover_timeout_);
  RedisDeadline attempt = deadline;
  bool lost = false;
  while (true) {
    RedisConnection& connection = master(attempt, failover, lost);
    std::string cause;
    try {
      RedisValue reply = connection.command(arguments, attempt);
      // After a failover, what follows in the operation (EVAL after NOSCRIPT on the promoted
      // replica) has the new master's timeout, not the one that the failover spent.
      deadline = attempt;
      if (lost) last_failover_ = deadline.waiter().now();
      if (reply.type != RedisValue::Type::error) return reply;
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
      notify_(cause + "; asking the sentinels for the master");
    }
    master_.reset();
    last_failover_ = deadline.waiter().now();
    if (failover.passed()) failover_too_long(cause);
    failover.pause(kFailoverPause);
    attempt = deadline.renewed(timeout_);
    lost = true;
  }
}

std::optional<RedisAddress> RedisTopology::ask_sentinel(const RedisAddress& sentinel,
                                                        RedisDeadline& deadline,
                                                        std::string& cause) {
  const std::string& name = deployment_.master_name;
  RedisConnection asked(sentinel, nullptr, deadline);
  const RedisValue reply = asked.command({"SENTINEL", "get-master-addr-by-name", name}, deadline);
  if (reply.type != RedisValue::Type::array || reply.elements.size() != 2 ||
      !is_text(reply.elements[0]) || !is_text(reply.elements[1]) ||
      !port_number(reply.elements[1].text)) {
    cause =
        reply.type == RedisValue::Type::nil
            ? fmt::format("{} knows no master '{}'", sentinel.shown, name)
            : fmt::format("{}: {}", sentinel.shown,
                          reply.type == RedisValue::Type::error ? reply.text
                                                                : std::string("unexpected reply"));
    return std::nullopt;
  }
  return node_address(deployment_.node, reply.elements[0].text,
                      *port_number(reply.elements[1].text));
}

RedisConnection RedisTopology::find_master(RedisDeadline& outage, RedisDeadline& failover,
                                           bool after_loss) {
  const std::string& name = deployment_.master_name;
  const std::size_t count = deployment_.sentinels.size();
  std::string last_cause = "no sentinel answered";
  bool failing_over = false;
  while (true) {
    // A master that several sentinels name is asked once a round.
    std::vector<std::string> masters_asked;
    for (std::size_t turn = 0; turn < count; ++turn) {
      RedisDeadline& search = failing_over ? failover : outage;
      if (search.passed()) break;
      const std::size_t index = (first_sentinel_ + turn) % count;
      std::optional<RedisAddress> named;
      try {
        RedisDeadline step = search.share(sentinel_share_);
        named = ask_sentinel(deployment_.sentinels[index], step, last_cause);
      } catch (const StoreUnavailable& error) {
        last_cause = error.what();
      }
      if (!named || std::find(masters_asked.begin(), masters_asked.end(), named->shown) !=
                        masters_asked.end())
        continue;
      masters_asked.push_back(named->shown);
      try {
        RedisDeadline step = search.share(master_share_);
        RedisConnection candidate(*named, tls_for(*named), step);
        const RedisValue role = candidate.command({"ROLE"}, step);
        if (role.type == RedisValue::Type::error) {
          // It answers, and refuses: no failover mends that.
          last_cause = fmt::format("{}: ROLE: {}", named->shown, role.text);
          continue;
        }
        if (role.type != RedisValue::Type::array || role.elements.empty() ||
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
      } catch (const RedisRefused& refused) {
        last_cause = refused.what();
      } catch (const StoreUnavailable& error) {
        last_cause = error.what();
        failing_over = true;
      }
    }
    if (failing_over && failover.passed()) failover_too_long(last_cause);
    if (!failing_over && outage.passed())
      throw StoreUnavailable(fmt::format("Redis at {}: no master '{}' within {}ms ({})",
                                         deployment_.shown, name, timeout_.count(), last_cause));
    (failing_over ? failover : outage).pause(kFailoverPause);
  }
}

void RedisTopology::look_for_a_second_master(const RedisDeadline& request) {
  if (warned_of_two_masters_) return;
  const std::size_t count = deployment_.sentinels.size();
  // A --redis-timeout of its own, the request's bound kept.
  const RedisDeadline deadline = request.renewed(timeout_);
  const std::string& master = master_shown_;
  std::vector<std::string> masters_asked{master};
  for (std::size_t turn = 1; turn < count; ++turn) {
    const RedisAddress& sentinel = deployment_.sentinels[(first_sentinel_ + turn) % count];
    try {
      std::string cause;
      RedisDeadline step = deadline.share(sentinel_share_);
      const std::optional<RedisAddress> named = ask_sentinel(sentinel, step, cause);
      if (!named || std::find(masters_asked.begin(), masters_asked.end(), named->shown) !=
                        masters_asked.end())
        continue;
      masters_asked.push_back(named->shown);
      step = deadline.share(master_share_);
      RedisConnection other(*named, tls_for(*named), step);
      const RedisValue role = other.command({"ROLE"}, step);
      if (role.type == RedisValue::Type::array && !role.elements.empty() &&
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

void RedisTopology::failover_too_long(const std::string& cause) const {
  throw StoreUnavailable(fmt::format(
      "Redis at {}: no master '{}' within {} of a failover ({}); raise {} above the sentinels' "
      "down-after-milliseconds plus the election",
      deployment_.shown, deployment_.master_name, format::human_duration(failover_timeout_), cause,
      kFailoverTimeoutOption));
}

void RedisTopology::for_each_master(RedisDeadline& deadline,
                                    const std::function<void(RedisConnection&)>& visit) {
  if (deployment_.kind == RedisDeployment::Kind::sentinel) {
    RedisDeadline failover = deadline.failover_budget(failover_timeout_);
    visit(master(deadline, failover, false));
    return;
  }
  RedisConnection& server = node_connection(deployment_.node, deadline);
  const RedisValue slots = server.command({"CLUSTER", "SLOTS"}, deadline);
  // Not a Cluster: "ERR This instance has cluster support disabled".
  if (slots.type != RedisValue::Type::array) {
    visit(server);
    return;
  }
  // {first slot, last slot, {host, port, id...} of the master, replicas...} per range.
  std::vector<RedisAddress> masters;
  for (const RedisValue& range : slots.elements) {
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) continue;
    const RedisValue& master = range.elements[2];
    const std::string host =
        master.elements[0].text.empty() ? deployment_.node.host : master.elements[0].text;
    RedisAddress address =
        node_address(deployment_.node, host, static_cast<int>(master.elements[1].integer));
    if (std::none_of(masters.begin(), masters.end(),
                     [&](const RedisAddress& known) { return known.shown == address.shown; }))
      masters.push_back(std::move(address));
  }
  for (const RedisAddress& master : masters) visit(node_connection(master, deadline));
}

}  // namespace ratelimit::stores::redis
