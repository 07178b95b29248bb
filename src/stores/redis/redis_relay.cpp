#include "stores/redis/redis_relay.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <span>
#include <system_error>
#include <utility>

#include "errors.hpp"
#include "format/quantities.hpp"
#include "stores/redis/redis_connection_transport.hpp"
#include "stores/redis/redis_deployment.hpp"
#include "stores/redis/redis_script.hpp"
#include "stores/redis/redis_script_protocol.hpp"

namespace ratelimit::stores {
namespace {

using std::chrono::nanoseconds;

// What a request starts with, named anew whenever requests or answers change form: an agent of
// another version answers a request of another form kUnsupported (as every version has), and
// its client goes direct from then on, so that an old client and a new agent (or the reverse)
// never read each other's fields. 2: answers carry what was said while serving the request, TLS
// files are named as written, with the client's directory. 3: a request carries when its
// caller's --redis-timeout ends.
constexpr std::string_view kRequestFormat = "redis-command-3";
constexpr std::string_view kUnsupported = "unsupported";
// The agent shows that it runs within this share of --redis-timeout (its answer, or its answer
// to whether it runs, on a connection of its own), or the caller goes direct: however long the
// store takes, an agent that is stopped or stuck costs a call this bound twice at most (the wait
// for the answer, then for the other).
constexpr int kLivenessShare = 10;
constexpr nanoseconds kShortestLiveness = std::chrono::milliseconds(1);

// Fields are written as "LENGTH:BYTES", so that any byte may be in one.
void put(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

void put_number(std::string& out, std::int64_t number) { put(out, std::to_string(number)); }

// Thrown for a request or an answer that is not of the form written here.
struct Malformed {};

std::string_view take(std::string_view& in) {
  const std::size_t colon = in.find(':');
  std::size_t length = 0;
  if (colon == std::string_view::npos) throw Malformed{};
  const auto [end, error] = std::from_chars(in.data(), in.data() + colon, length);
  if (error != std::errc() || end != in.data() + colon || length > in.size() - colon - 1)
    throw Malformed{};
  const std::string_view field = in.substr(colon + 1, length);
  in.remove_prefix(colon + 1 + length);
  return field;
}

std::int64_t take_number(std::string_view& in) {
  const std::string_view text = take(in);
  std::int64_t number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) throw Malformed{};
  return number;
}

void put_value(std::string& out, const RedisValue& value) {
  switch (value.type) {
    case RedisValue::Type::nil:
      put(out, "nil");
      break;
    case RedisValue::Type::integer:
      put(out, "integer");
      put_number(out, value.integer);
      break;
    case RedisValue::Type::string:
      put(out, "string");
      put(out, value.text);
      break;
    case RedisValue::Type::status:
      put(out, "status");
      put(out, value.text);
      break;
    case RedisValue::Type::error:
      put(out, "error");
      put(out, value.text);
      break;
    case RedisValue::Type::array:
      put(out, "array");
      put_number(out, static_cast<std::int64_t>(value.elements.size()));
      for (const RedisValue& element : value.elements) put_value(out, element);
      break;
  }
}

RedisValue take_value(std::string_view& in, int depth = 0) {
  // Replies of the bucket script nest two deep; a deeper one is no answer of an agent's.
  if (depth > 8) throw Malformed{};
  const std::string_view type = take(in);
  RedisValue value;
  if (type == "nil") return value;
  if (type == "integer") {
    value.type = RedisValue::Type::integer;
    value.integer = take_number(in);
  } else if (type == "string" || type == "status" || type == "error") {
    value.type = type == "string"   ? RedisValue::Type::string
                 : type == "status" ? RedisValue::Type::status
                                    : RedisValue::Type::error;
    value.text = take(in);
  } else if (type == "array") {
    value.type = RedisValue::Type::array;
    const std::int64_t count = take_number(in);
    if (count < 0 || static_cast<std::size_t>(count) > in.size()) throw Malformed{};
    for (std::int64_t i = 0; i < count; ++i) value.elements.push_back(take_value(in, depth + 1));
  } else {
    throw Malformed{};
  }
  return value;
}

// The directory that the relative names among `tls`'s files are in: the working directory; empty
// when all are absolute, so that clients in other directories share the deployment.
std::string directory_of_relative_files(const RedisTlsOptions& tls) {
  const auto relative = [](const std::string& file) {
    return !file.empty() && !file.starts_with('/');
  };
  if (!relative(tls.ca_file) && !relative(tls.cert_file) && !relative(tls.key_file)) return {};
  std::error_code error;
  const std::filesystem::path directory = std::filesystem::current_path(error);
  return error ? std::string() : directory.string();
}

// Every answer starts with its kind, then (but for kUnsupported, whose form every version keeps)
// what was said while serving it, as one field: each a kind ("note": --verbose's, or "warning")
// and its text.
std::string answer_head(std::string_view kind, std::string_view said) {
  std::string out;
  put(out, kind);
  put(out, said);
  return out;
}

// The answer that carries an error back: its kind and message.
std::string failure_answer(std::string_view kind, std::string_view said, std::string_view message) {
  std::string out = answer_head(kind, said);
  put(out, message);
  return out;
}

// The answer that carries the error being handled back to its client, as what it is.
std::string current_failure_answer(std::string_view said) {
  try {
    throw;
  } catch (const RedisTooLate&) {
    return answer_head("too_late", said);
  } catch (const RedisInterrupted&) {
    return failure_answer("unavailable", said, "the ratelimit agent was stopped");
  } catch (const RedisConnectionLost& lost) {
    std::string out = failure_answer("lost", said, lost.what());
    put(out, lost.sent() ? "1" : "0");
    return out;
  } catch (const RedisRefused& refused) {
    return failure_answer("refused", said, refused.what());
  } catch (const StoreUnavailable& unavailable) {
    return failure_answer("unavailable", said, unavailable.what());
  } catch (const UsageError& usage) {
    return failure_answer("usage", said, usage.what());
  } catch (const InputError& input) {
    return failure_answer("input", said, input.what());
  } catch (const std::exception& error) {
    return failure_answer("unavailable", said, std::string("the ratelimit agent: ") + error.what());
  }
}

// How soon the agent must show that it runs, for a caller of `timeout` (--redis-timeout).
nanoseconds liveness_bound(std::chrono::milliseconds timeout) {
  return std::max(nanoseconds(timeout) / kLivenessShare, kShortestLiveness);
}

}  // namespace

RedisRelayClient::RedisRelayClient(std::shared_ptr<AgentLink> link, RedisRelayDeployment deployment,
                                   Notify notify, Notify warn)
    : link_(std::move(link)),
      shown_url_(hide_password(deployment.url)),
      liveness_(liveness_bound(deployment.timeout)),
      failover_timeout_(deployment.failover_timeout),
      notify_(std::move(notify)),
      warn_(std::move(warn)) {
  put(deployment_fields_, kRequestFormat);
  put(deployment_fields_, deployment.url);
  put(deployment_fields_, deployment.tls.ca_file);
  put(deployment_fields_, deployment.tls.cert_file);
  put(deployment_fields_, deployment.tls.key_file);
  put(deployment_fields_, directory_of_relative_files(deployment.tls));
  put(deployment_fields_, deployment.tls.verify ? "1" : "0");
  put_number(deployment_fields_, deployment.timeout.count());
  put_number(deployment_fields_, deployment.failover_timeout.count());
}

std::optional<RedisValue> RedisRelayClient::command(const std::string& redis_key,
                                                    const std::vector<std::string>& arguments,
                                                    RedisDeadline& deadline) {
  try {
    deadline.check("reply");
  } catch (const RedisFailure& failure) {
    throw StoreUnavailable("Redis at " + shown_url_ + ": " + failure.what());
  }
  std::string request = deployment_fields_;
  put_number(request, deadline.refused_at().count());
  put_number(request, deadline.unavailable_at().count());
  put(request, redis_key);
  put_number(request, static_cast<std::int64_t>(arguments.size()));
  for (const std::string& argument : arguments) put(request, argument);
  // The agent answers within the operation's timeout, or within the failover timeout after it
  // (Sentinel, Cluster), as the direct path waits; the request's own deadline ends it sooner.
  const nanoseconds unavailable_at = deadline.unavailable_at() + failover_timeout_;
  const nanoseconds sent_at = deadline.waiter().now();
  const AgentAnswer answer = link_->exchange(
      request, std::min(deadline.refused_at(), unavailable_at), liveness_, deadline.waiter());
  switch (answer.outcome) {
    case AgentAnswer::Outcome::no_agent:
      return std::nullopt;
    case AgentAnswer::Outcome::not_answering: {
      // The time spent on the agent is given back to the request's own deadline, so that the
      // server decides as it would have without the agent (--try included); the operation's
      // timeout is not, and bounds the whole call.
      const nanoseconds spent = deadline.waiter().now() - sent_at;
      if (deadline.refused_at() != nanoseconds::max())
        deadline.refuse_after(deadline.refused_at() + spent);
      notify_(
          fmt::format("the ratelimit agent showed no sign of life within {}; to Redis at {} "
                      "directly",
                      format::human_duration(liveness_), shown_url_));
      return std::nullopt;
    }
    case AgentAnswer::Outcome::lost:
      throw RedisConnectionLost("Redis at " + shown_url_ + ": the ratelimit agent went away", true);
    case AgentAnswer::Outcome::stopped:
      throw RedisInterrupted{answer.signal};
    case AgentAnswer::Outcome::too_late:
      if (deadline.waiter().now() >= deadline.refused_at()) throw RedisTooLate{};
      throw StoreUnavailable("Redis at " + shown_url_ + ": no answer through the ratelimit agent");
    case AgentAnswer::Outcome::answered:
      break;
  }
  try {
    std::string_view in = answer.answer;
    const std::string_view kind = take(in);
    if (kind == kUnsupported) return std::nullopt;
    tell_said(take(in));
    if (kind == "reply") return take_value(in);
    if (kind == "too_late") throw RedisTooLate{};
    const std::string message(take(in));
    if (kind == "unavailable") throw StoreUnavailable(message);
    if (kind == "refused") throw RedisRefused(message);
    if (kind == "lost") throw RedisConnectionLost(message, take(in) == "1");
    if (kind == "usage") throw UsageError(message);
    if (kind == "input") throw InputError(message);
  } catch (const Malformed&) {
  }
  throw StoreUnavailable("Redis at " + shown_url_ +
                         ": the ratelimit agent gave an answer that makes no sense");
}

void RedisRelayClient::tell_said(std::string_view said) const {
  // All checked before any is told: an answer that makes no sense says nothing.
  std::vector<std::pair<std::string_view, std::string>> told;
  while (!said.empty()) {
    const std::string_view kind = take(said);
    if (kind != "note" && kind != "warning") throw Malformed{};
    told.emplace_back(kind, take(said));
  }
  for (const auto& [kind, text] : told) (kind == "note" ? notify_ : warn_)(text);
}

struct RedisRelay::Request {
  // What makes the deployment: the request's fields up to its deadline, as they came.
  std::string deployment_key;
  std::string url;
  RedisTlsOptions tls;
  std::chrono::milliseconds timeout{};
  std::chrono::milliseconds failover_timeout{};
  nanoseconds refused_at{};
  // When the caller's --redis-timeout ends: the agent's timeout counts from when the caller
  // began, not from when its request's turn came.
  nanoseconds unavailable_at{};
  std::string redis_key;
  std::vector<std::string> arguments;
};

namespace {

RedisRelay::Request parse_request(std::string_view request) {
  RedisRelay::Request parsed;
  std::string_view in = request;
  if (take(in) != kRequestFormat) throw Malformed{};
  parsed.url = take(in);
  parsed.tls.ca_file = take(in);
  parsed.tls.cert_file = take(in);
  parsed.tls.key_file = take(in);
  parsed.tls.directory = take(in);
  parsed.tls.verify = take(in) == "1";
  parsed.timeout = std::chrono::milliseconds(take_number(in));
  parsed.failover_timeout = std::chrono::milliseconds(take_number(in));
  parsed.deployment_key = request.substr(0, request.size() - in.size());
  parsed.refused_at = nanoseconds(take_number(in));
  parsed.unavailable_at = nanoseconds(take_number(in));
  parsed.redis_key = take(in);
  const std::int64_t count = take_number(in);
  if (count <= 0 || static_cast<std::size_t>(count) > in.size()) throw Malformed{};
  for (std::int64_t i = 0; i < count; ++i) parsed.arguments.emplace_back(take(in));
  if (!in.empty()) throw Malformed{};
  return parsed;
}

// Where a script call's ARGV starts: after EVALSHA, the SHA-1, the count of keys (1) and the key.
constexpr std::size_t kFirstScriptArgument = 4;

// Whether a batch may merge `request` with the others on its key: a call of the bucket script
// that this agent was built with (whose batch operation it knows: a client of another version
// sends another), on the request's key, of one request (a reserve_all is several keys' decision,
// even of one key: never a batch's part).
bool mergeable(const RedisRelay::Request& request) {
  const std::vector<std::string>& arguments = request.arguments;
  return arguments.size() > kFirstScriptArgument && arguments[0] == "EVALSHA" &&
         arguments[1] == kRedisBucketScriptSha1 && arguments[2] == "1" &&
         arguments[3] == request.redis_key &&
         arguments[kFirstScriptArgument] != script::kBatchOperation &&
         arguments[kFirstScriptArgument] != script::kReserveAllOperation;
}

// The script call that serves `merged` (requests of `parsed` for which mergeable() holds, on one
// key) in one batch, in their order.
std::vector<std::string> batch_call(const std::vector<RedisRelay::Request>& parsed,
                                    const std::vector<std::size_t>& merged) {
  const std::vector<std::string>& first = parsed[merged.front()].arguments;
  std::vector<std::string> call(first.begin(), first.begin() + kFirstScriptArgument);
  call.emplace_back(script::kBatchOperation);
  for (const std::size_t i : merged)
    script::add_to_batch(call, std::span(parsed[i].arguments).subspan(kFirstScriptArgument));
  return call;
}

// The deadline of a request on the agent's `waiter` that its caller waits for until
// `unavailable_at` (RedisRelay::unavailable_at); a failover's tries have the whole timeout each,
// as the direct path's.
RedisDeadline caller_deadline(const RedisRelay::Request& request, nanoseconds unavailable_at,
                              io::Waiter& waiter) {
  const nanoseconds left = std::max(unavailable_at - waiter.now(), nanoseconds::zero());
  return RedisDeadline(std::chrono::ceil<std::chrono::milliseconds>(left), &waiter)
      .share(request.timeout);
}

// The answer to a request whose caller's timeout ran out before its turn came, as its caller
// would have been answered alone by a server that does not reply.
std::string timed_out_answer(const RedisRelay::Request& request, io::Waiter& waiter) {
  try {
    caller_deadline(request, request.unavailable_at, waiter).check("reply");
  } catch (const RedisFailure& failure) {
    return failure_answer("unavailable", {},
                          "Redis at " + hide_password(request.url) + ": " + failure.what());
  } catch (...) {
    return current_failure_answer({});
  }
  return answer_head("too_late", {});
}

}  // namespace

nanoseconds RedisRelay::unavailable_at(const Request& request) const {
  const auto found = deployments_.find(request.deployment_key);
  const nanoseconds began = request.unavailable_at - request.timeout;
  if (found != deployments_.end() && found->second.last_failover() > began)
    return request.unavailable_at + request.failover_timeout;
  return request.unavailable_at;
}

std::string RedisRelay::route(std::string_view request) {
  try {
    return parse_request(request).deployment_key;
  } catch (const Malformed&) {
    return {};
  }
}

RedisTopology& RedisRelay::deployment(const Request& request) {
  auto found = deployments_.find(request.deployment_key);
  if (found == deployments_.end()) {
    // What it says goes to the client whose request was being served, said there as the direct
    // path says it (--verbose's notes only under the client's --verbose).
    const auto kept_as = [this](std::string_view kind) {
      return [this, kind](const std::string& text) {
        put(said_, kind);
        put(said_, text);
      };
    };
    RedisTlsOptions tls = request.tls;
    tls.session_dir = session_dir_;
    found = deployments_
                .try_emplace(request.deployment_key, parse_redis_deployment(request.url),
                             request.timeout, request.failover_timeout, kept_as("note"),
                             kept_as("warning"), tls)
                .first;
  }
  return found->second;
}

std::string RedisRelay::reply_answer(const Request& request, const RedisValue& reply,
                                     std::string_view said) {
  if ((request.arguments[0] == "EVALSHA" || request.arguments[0] == "EVAL") &&
      reply.type != RedisValue::Type::error)
    ++decisions_;
  std::string out = answer_head("reply", said);
  put_value(out, reply);
  return out;
}

std::string RedisRelay::answer_alone(const Request& request, io::Waiter& waiter,
                                     std::string_view said_before) {
  said_ = said_before;
  try {
    RedisDeadline deadline = caller_deadline(request, unavailable_at(request), waiter);
    const RedisValue reply =
        deployment(request).command(request.redis_key, request.arguments, deadline);
    return reply_answer(request, reply, std::exchange(said_, {}));
  } catch (...) {
    return current_failure_answer(std::exchange(said_, {}));
  }
}

void RedisRelay::answer_command(const std::vector<Request>& parsed,
                                const std::vector<std::size_t>& requests, RedisValue reply,
                                std::string_view server, io::Waiter& waiter, std::string_view said,
                                std::vector<std::string>& answers) {
  // Sent to the wrong node of a Cluster: nothing ran, and each request goes there on its own.
  if (RedisTopology::sent_elsewhere(reply)) {
    for (const std::size_t i : requests) answers[i] = answer_alone(parsed[i], waiter, said);
    return;
  }
  if (requests.size() == 1) {
    answers[requests.front()] = reply_answer(parsed[requests.front()], reply, said);
    return;
  }
  std::vector<RedisValue> own;
  try {
    own = script::decode_batch(std::move(reply), requests.size(), server);
  } catch (const StoreUnavailable&) {
    const std::string failure = current_failure_answer(said);
    for (const std::size_t i : requests) answers[i] = failure;
    return;
  }
  for (std::size_t j = 0; j < requests.size(); ++j)
    answers[requests[j]] = reply_answer(parsed[requests[j]], own[j], said);
}

std::vector<std::string> RedisRelay::answer(const std::vector<std::string>& requests,
                                            io::Waiter& waiter) {
  std::vector<std::string> answers(requests.size());
  // Each deployment's requests, in the order they came.
  std::map<std::string_view, std::vector<std::size_t>> batches;
  std::vector<Request> parsed(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      parsed[i] = parse_request(requests[i]);
      batches[parsed[i].deployment_key].push_back(i);
    } catch (const Malformed&) {
      put(answers[i], kUnsupported);
    }
  }
  for (auto& [deployment_key, batch] : batches) {
    // Those whose callers have stopped waiting are not sent: nothing is booked for nobody; nor
    // those whose timeout ran out while they waited for their turn (the server did not answer
    // those before). Once sent, a reply is waited for until the timeout, even if its caller has
    // stopped waiting: dropping the connection mid-reply, as a caller of its own does, would cost
    // the server a new connection for every late reply.
    std::erase_if(batch, [&](std::size_t i) {
      const nanoseconds now = waiter.now();
      if (parsed[i].refused_at > now && unavailable_at(parsed[i]) > now) return false;
      answers[i] = parsed[i].refused_at <= now ? answer_head("too_late", {})
                                               : timed_out_answer(parsed[i], waiter);
      return true;
    });
    if (batch.size() > 1) {
      // The requests each command answers: one, or the run of script calls on one key merged
      // into one batch, placed where the run's first came. Any other command on the key ends its
      // run, so that what reaches the key keeps its order.
      std::vector<std::vector<std::size_t>> answered_by;
      std::map<std::string_view, std::size_t> open_runs;
      for (const std::size_t i : batch) {
        const bool merges = mergeable(parsed[i]);
        const auto run = open_runs.find(parsed[i].redis_key);
        if (run != open_runs.end()) {
          if (merges) {
            answered_by[run->second].push_back(i);
            continue;
          }
          open_runs.erase(run);
        }
        if (merges) open_runs.emplace(parsed[i].redis_key, answered_by.size());
        answered_by.push_back({i});
      }
      std::vector<std::pair<std::string, std::vector<std::string>>> commands;
      for (const std::vector<std::size_t>& requests : answered_by) {
        const Request& first = parsed[requests.front()];
        commands.emplace_back(
            first.redis_key, requests.size() == 1 ? first.arguments : batch_call(parsed, requests));
      }
      std::optional<std::vector<RedisValue>> replies;
      // What is said while the batch is sent (connecting, a TLS session resumed) is said to
      // each of its callers, as each would have met it alone.
      said_.clear();
      std::string server;
      try {
        // The batch is waited for as long as its most pressed caller waits, none past its own.
        const Request& first =
            parsed[*std::min_element(batch.begin(), batch.end(), [&](std::size_t a, std::size_t b) {
              return parsed[a].unavailable_at < parsed[b].unavailable_at;
            })];
        RedisDeadline deadline = caller_deadline(first, unavailable_at(first), waiter);
        RedisTopology& topology = deployment(first);
        server = "Redis at " + topology.shown_url();
        replies = topology.pipeline(commands, deadline);
      } catch (...) {
        const std::string failure = current_failure_answer(std::exchange(said_, {}));
        for (const std::size_t i : batch) answers[i] = failure;
        continue;
      }
      const std::string said_in_batch = std::exchange(said_, {});
      if (replies) {
        for (std::size_t c = 0; c < answered_by.size(); ++c)
          answer_command(parsed, answered_by[c], std::move((*replies)[c]), server, waiter,
                         said_in_batch, answers);
        continue;
      }
    }
    for (const std::size_t i : batch) answers[i] = answer_alone(parsed[i], waiter, {});
  }
  return answers;
}

}  // namespace ratelimit::stores
