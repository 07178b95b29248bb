#include "stores/redis/redis_relay.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iterator>
#include <span>
#include <system_error>
#include <utility>

#include "errors.hpp"
#include "format/quantities.hpp"
#include "io/acting_waiter.hpp"
#include "stores/redis/redis_connection_transport.hpp"
#include "stores/redis/redis_deployment.hpp"
#include "stores/redis/redis_resp.hpp"
#include "stores/redis/redis_script.hpp"
#include "stores/redis/redis_script_protocol.hpp"

namespace ratelimit::stores::redis {
namespace {

using std::chrono::nanoseconds;

// What a request starts with, named anew whenever requests or answers change form: an agent of
// another version answers a request of another form kUnsupportedAnswer (as every version has),
// and its client goes direct from then on, so that an old client and a new agent (or the
// reverse) never read each other's fields. 2: answers carry what was said while serving the
// request, TLS files are named as written, with the client's directory. 3: a request carries
// when its caller's --redis-timeout ends. 4: requests and answers are RESP, Redis's own protocol.
constexpr std::string_view kRequestFormat = "redis-command-4";
// The answer to a request of another form, in the form of the first versions, which every
// version keeps (a length, a colon, the word).
constexpr std::string_view kUnsupportedAnswer = "11:unsupported";
// The agent shows that it runs within this share of --redis-timeout (its answer, or its answer
// to whether it runs, on a connection of its own), or the caller goes direct: however long the
// store takes, an agent that is stopped or stuck costs a call this bound twice at most (the wait
// for the answer, then for the other).
constexpr int kLivenessShare = 10;
constexpr nanoseconds kShortestLiveness = std::chrono::milliseconds(1);

// A request is one command of bulk strings: the deployment's fields (kDeploymentFields of them,
// kRequestFormat first), the deadlines, the key, then the command sent to Redis.
constexpr std::size_t kDeploymentFields = 9;
constexpr std::size_t kFirstCommandField = kDeploymentFields + 3;

// Thrown for a request or an answer that is not of the form written here.
struct Malformed {};

std::int64_t number_of(std::string_view text) {
  std::int64_t number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) throw Malformed{};
  return number;
}

Value value_of(Value::Type type, std::string text = {}) {
  Value value;
  value.type = type;
  value.text = std::move(text);
  return value;
}

// An answer is an array of two: what was said while serving the request (kind and text in turn,
// the kind "note", --verbose's, or "warning"), then how it ended: its reply in an array of one,
// or a failure as one error value, its kind first ("UNAVAILABLE the message").
std::string answer_of(const std::vector<std::string>& said, Value outcome) {
  Value answer = value_of(Value::Type::array);
  Value& told = answer.elements.emplace_back(value_of(Value::Type::array));
  for (const std::string& text : said) told.elements.push_back(value_of(Value::Type::string, text));
  answer.elements.push_back(std::move(outcome));
  return resp_value(answer);
}

std::string reply_outcome(const std::vector<std::string>& said, Value reply) {
  Value outcome = value_of(Value::Type::array);
  outcome.elements.push_back(std::move(reply));
  return answer_of(said, std::move(outcome));
}

// The kinds of failure an answer carries, each the error its client throws.
constexpr std::string_view kTooLate = "TOO_LATE";
constexpr std::string_view kUnavailable = "UNAVAILABLE";
constexpr std::string_view kLostUnsent = "LOST_UNSENT";
constexpr std::string_view kLostSent = "LOST_SENT";
constexpr std::string_view kRefused = "REFUSED";
constexpr std::string_view kUsage = "USAGE";
constexpr std::string_view kInput = "INPUT";

std::string failure_answer(const std::vector<std::string>& said, std::string_view kind,
                           std::string_view message = {}) {
  std::string text(kind);
  if (!message.empty()) text += ' ' + std::string(message);
  return answer_of(said, value_of(Value::Type::error, std::move(text)));
}

// The directory that the relative names among `tls`'s files are in: the working directory; empty
// when all are absolute, so that clients in other directories share the deployment.
std::string directory_of_relative_files(const TlsOptions& tls) {
  const auto relative = [](const std::string& file) {
    return !file.empty() && !file.starts_with('/');
  };
  if (!relative(tls.ca_file) && !relative(tls.cert_file) && !relative(tls.key_file)) return {};
  std::error_code error;
  const std::filesystem::path directory = std::filesystem::current_path(error);
  return error ? std::string() : directory.string();
}

// The answer that carries the error being handled back to its client, as what it is.
std::string current_failure_answer(const std::vector<std::string>& said) {
  try {
    throw;
  } catch (const TooLate&) {
    return failure_answer(said, kTooLate);
  } catch (const Interrupted&) {
    return failure_answer(said, kUnavailable, "the ratelimit agent was stopped");
  } catch (const ConnectionLost& lost) {
    return failure_answer(said, lost.sent() ? kLostSent : kLostUnsent, lost.what());
  } catch (const Refused& refused) {
    return failure_answer(said, kRefused, refused.what());
  } catch (const StoreUnavailable& unavailable) {
    return failure_answer(said, kUnavailable, unavailable.what());
  } catch (const UsageError& usage) {
    return failure_answer(said, kUsage, usage.what());
  } catch (const InputError& input) {
    return failure_answer(said, kInput, input.what());
  } catch (const std::exception& error) {
    return failure_answer(said, kUnavailable, std::string("the ratelimit agent: ") + error.what());
  }
}

// Throws the failure that `error` (an answer's error value) carries.
[[noreturn]] void throw_failure(std::string_view error) {
  const std::size_t space = std::min(error.find(' '), error.size());
  const std::string_view kind = error.substr(0, space);
  const std::string message(error.substr(std::min(space + 1, error.size())));
  if (kind == kTooLate && message.empty()) throw TooLate{};
  if (kind == kUnavailable) throw StoreUnavailable(message);
  if (kind == kRefused) throw Refused(message);
  if (kind == kLostUnsent || kind == kLostSent) throw ConnectionLost(message, kind == kLostSent);
  if (kind == kUsage) throw UsageError(message);
  if (kind == kInput) throw InputError(message);
  throw Malformed{};
}

// The settings as a request's first fields (kRequestFormat first, kDeploymentFields in all), and
// back: written once per client, read by the agent; the URL goes as written, TLS file names with
// the client's directory.
std::vector<std::string> fields_of(const Settings& settings) {
  return {std::string(kRequestFormat),
          settings.url.written,
          settings.tls.ca_file,
          settings.tls.cert_file,
          settings.tls.key_file,
          directory_of_relative_files(settings.tls),
          settings.tls.verify ? "1" : "0",
          std::to_string(settings.timeout.count()),
          std::to_string(settings.failover_timeout.count())};
}

// The deployment is left unparsed: the agent reads the URL when it first serves the deployment.
Settings settings_of(const std::vector<std::string>& fields) {
  if (fields[0] != kRequestFormat) throw Malformed{};
  Settings settings;
  settings.url = Url(fields[1]);
  settings.tls.ca_file = fields[2];
  settings.tls.cert_file = fields[3];
  settings.tls.key_file = fields[4];
  settings.tls.directory = fields[5];
  settings.tls.verify = fields[6] == "1";
  settings.timeout = std::chrono::milliseconds(number_of(fields[7]));
  settings.failover_timeout = std::chrono::milliseconds(number_of(fields[8]));
  return settings;
}

// How soon the agent must show that it runs, for a caller of `timeout` (--redis-timeout).
nanoseconds liveness_bound(std::chrono::milliseconds timeout) {
  return std::max(nanoseconds(timeout) / kLivenessShare, kShortestLiveness);
}

}  // namespace

RelayClient::RelayClient(std::shared_ptr<AgentLink> link, const Settings& settings, Notify notify,
                         Notify warn)
    : link_(std::move(link)),
      deployment_fields_(fields_of(settings)),
      shown_url_(settings.url.shown),
      liveness_(liveness_bound(settings.timeout)),
      failover_timeout_(settings.failover_timeout),
      notify_(std::move(notify)),
      warn_(std::move(warn)) {}

std::optional<Value> RelayClient::command(const std::string& redis_key,
                                          const std::vector<std::string>& arguments,
                                          Deadline& deadline) {
  try {
    deadline.check("reply");
  } catch (const Failure& failure) {
    throw StoreUnavailable("Redis at " + shown_url_ + ": " + failure.what());
  }
  std::vector<std::string> fields = deployment_fields_;
  fields.push_back(std::to_string(deadline.refused_at().count()));
  fields.push_back(std::to_string(deadline.unavailable_at().count()));
  fields.push_back(redis_key);
  fields.insert(fields.end(), arguments.begin(), arguments.end());
  const std::string request = resp_command(fields);
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
      throw ConnectionLost("Redis at " + shown_url_ + ": the ratelimit agent went away", true);
    case AgentAnswer::Outcome::stopped:
      throw Interrupted{answer.signal};
    case AgentAnswer::Outcome::too_late:
      if (deadline.waiter().now() >= deadline.refused_at()) throw TooLate{};
      throw StoreUnavailable("Redis at " + shown_url_ + ": no answer through the ratelimit agent");
    case AgentAnswer::Outcome::answered:
      break;
  }
  if (answer.answer == kUnsupportedAnswer) return std::nullopt;
  try {
    std::optional<Value> read = read_resp_value(answer.answer);
    if (!read || read->type != Value::Type::array || read->elements.size() != 2) throw Malformed{};
    tell_said(read->elements[0]);
    Value& outcome = read->elements[1];
    if (outcome.type == Value::Type::array && outcome.elements.size() == 1)
      return std::move(outcome.elements[0]);
    if (outcome.type == Value::Type::error) throw_failure(outcome.text);
  } catch (const Malformed&) {
  }
  throw StoreUnavailable("Redis at " + shown_url_ +
                         ": the ratelimit agent gave an answer that makes no sense");
}

void RelayClient::tell_said(const Value& said) const {
  // All checked before any is told: an answer that makes no sense says nothing.
  if (said.type != Value::Type::array || said.elements.size() % 2 != 0) throw Malformed{};
  for (const Value& field : said.elements) {
    if (field.type != Value::Type::string) throw Malformed{};
  }
  for (std::size_t i = 0; i < said.elements.size(); i += 2) {
    const std::string& kind = said.elements[i].text;
    if (kind != "note" && kind != "warning") throw Malformed{};
  }
  for (std::size_t i = 0; i < said.elements.size(); i += 2)
    (said.elements[i].text == "note" ? notify_ : warn_)(said.elements[i + 1].text);
}

struct Relay::Request {
  // What makes the deployment: the request's fields up to its deadline, as they came.
  std::string deployment_key;
  // As the client sent them, its URL shown as the client shows it; the deployment not yet read
  // (Relay::deployment).
  Settings settings;
  nanoseconds refused_at{};
  // When the caller's --redis-timeout ends: the agent's timeout counts from when the caller
  // began, not from when its request's turn came.
  nanoseconds unavailable_at{};
  std::string redis_key;
  std::vector<std::string> arguments;
};

namespace {

Relay::Request parse_request(std::string_view request) {
  std::optional<Value> read = read_resp_value(request);
  if (!read || read->type != Value::Type::array || read->elements.size() <= kFirstCommandField)
    throw Malformed{};
  std::vector<std::string> fields;
  for (Value& field : read->elements) {
    if (field.type != Value::Type::string) throw Malformed{};
    fields.push_back(std::move(field.text));
  }
  Relay::Request parsed;
  parsed.settings = settings_of(fields);
  parsed.deployment_key =
      resp_command(std::vector<std::string>(fields.begin(), fields.begin() + kDeploymentFields));
  parsed.refused_at = nanoseconds(number_of(fields[kDeploymentFields]));
  parsed.unavailable_at = nanoseconds(number_of(fields[kDeploymentFields + 1]));
  parsed.redis_key = fields[kDeploymentFields + 2];
  parsed.arguments.assign(std::make_move_iterator(fields.begin() + kFirstCommandField),
                          std::make_move_iterator(fields.end()));
  return parsed;
}

// Where a script call's ARGV starts: after FCALL, the function, the count of keys (1) and the key.
constexpr std::size_t kFirstScriptArgument = 4;

// Whether a batch may merge `request` with the others on its key: a call of the bucket script
// that this agent was built with (whose batch operation it knows: a client of another version
// sends another), on the request's key, of one request (a reserve_all is several keys' decision,
// even of one key: never a batch's part).
bool mergeable(const Relay::Request& request) {
  const std::vector<std::string>& arguments = request.arguments;
  return arguments.size() > kFirstScriptArgument && arguments[0] == "FCALL" &&
         arguments[1] == kRedisBucketFunction && arguments[2] == "1" &&
         arguments[3] == request.redis_key && arguments[kFirstScriptArgument] != kBatchOperation &&
         arguments[kFirstScriptArgument] != kReserveAllOperation;
}

// The script call that serves `merged` (requests of `parsed` for which mergeable() holds, on one
// key) in one batch, in their order.
std::vector<std::string> batch_call(const std::vector<Relay::Request>& parsed,
                                    const std::vector<std::size_t>& merged) {
  const std::vector<std::string>& first = parsed[merged.front()].arguments;
  std::vector<std::string> call(first.begin(), first.begin() + kFirstScriptArgument);
  call.emplace_back(kBatchOperation);
  for (const std::size_t i : merged)
    add_to_batch(call, std::span(parsed[i].arguments).subspan(kFirstScriptArgument));
  return call;
}

// The deadline of a request on the agent's `waiter` that its caller waits for until
// `unavailable_at` (Relay::unavailable_at); a failover's tries have the whole timeout each,
// as the direct path's.
Deadline caller_deadline(const Relay::Request& request, nanoseconds unavailable_at,
                         io::Waiter& waiter) {
  const nanoseconds left = std::max(unavailable_at - waiter.now(), nanoseconds::zero());
  return Deadline(std::chrono::ceil<std::chrono::milliseconds>(left), &waiter)
      .share(request.settings.timeout);
}

// The answer to a request whose caller's timeout ran out before its turn came, as its caller
// would have been answered alone by a server that does not reply.
std::string timed_out_answer(const Relay::Request& request, io::Waiter& waiter) {
  try {
    caller_deadline(request, request.unavailable_at, waiter).check("reply");
  } catch (const Failure& failure) {
    return failure_answer({}, kUnavailable,
                          "Redis at " + request.settings.url.shown + ": " + failure.what());
  } catch (...) {
    return current_failure_answer({});
  }
  return failure_answer({}, kTooLate);
}

}  // namespace

nanoseconds Relay::unavailable_at(const Request& request) const {
  const auto found = deployments_.find(request.deployment_key);
  const nanoseconds began = request.unavailable_at - request.settings.timeout;
  if (found != deployments_.end() && found->second.last_failover() > began)
    return request.unavailable_at + request.settings.failover_timeout;
  return request.unavailable_at;
}

std::string Relay::route(std::string_view request) {
  try {
    return parse_request(request).deployment_key;
  } catch (const Malformed&) {
    return {};
  }
}

Topology& Relay::deployment(const Request& request) {
  auto found = deployments_.find(request.deployment_key);
  if (found == deployments_.end()) {
    // What it says goes to the client whose request was being served, said there as the direct
    // path says it (--verbose's notes only under the client's --verbose).
    const auto kept_as = [this](std::string_view kind) {
      return [this, kind](const std::string& text) {
        said_.emplace_back(kind);
        said_.push_back(text);
      };
    };
    Settings settings = request.settings;
    settings.parse_url();
    settings.tls.session_dir = session_dir_;
    found = deployments_
                .try_emplace(request.deployment_key, std::move(settings), kept_as("note"),
                             kept_as("warning"))
                .first;
  }
  return found->second;
}

std::string Relay::reply_answer(const Request& request, const Value& reply,
                                const std::vector<std::string>& said) {
  if (request.arguments[0] == "FCALL" && reply.type != Value::Type::error) ++decisions_;
  return reply_outcome(said, reply);
}

std::string Relay::answer_alone(const Request& request, io::Waiter& waiter,
                                const std::vector<std::string>& said_before) {
  said_ = said_before;
  try {
    Deadline deadline = caller_deadline(request, unavailable_at(request), waiter);
    // The caller's own deadline (--timeout) ends the agent's tries too: past it, nobody waits for
    // them, and what they send may still book.
    deadline.refuse_after(request.refused_at);
    // The caller's own policy waits for a restart; this one for a failover and follows a
    // redirect, sending again what the caller would: the command says it (may_send_again).
    const Value reply = deployment(request).command(request.redis_key, request.arguments, deadline);
    return reply_answer(request, reply, std::exchange(said_, {}));
  } catch (...) {
    return current_failure_answer(std::exchange(said_, {}));
  }
}

void Relay::answer_command(const std::vector<Request>& parsed,
                           const std::vector<std::size_t>& requests, Value reply,
                           std::string_view server, io::Waiter& waiter,
                           const std::vector<std::string>& said,
                           std::vector<std::string>& answers) {
  // Sent to the wrong node of a Cluster: nothing ran, and each request goes there on its own.
  if (Topology::sent_elsewhere(reply)) {
    for (const std::size_t i : requests) answers[i] = answer_alone(parsed[i], waiter, said);
    return;
  }
  if (requests.size() == 1) {
    answers[requests.front()] = reply_answer(parsed[requests.front()], reply, said);
    return;
  }
  std::vector<Value> own;
  try {
    own = decode_batch(std::move(reply), requests.size(), server);
  } catch (const StoreUnavailable&) {
    const std::string failure = current_failure_answer(said);
    for (const std::size_t i : requests) answers[i] = failure;
    return;
  }
  for (std::size_t j = 0; j < requests.size(); ++j)
    answers[requests[j]] = reply_answer(parsed[requests[j]], own[j], said);
}

std::vector<std::string> Relay::answer(const std::vector<std::string>& requests, io::Waiter& waiter,
                                       const AnswerNow& answer_now) {
  std::vector<std::string> answers(requests.size());
  // Each deployment's requests, in the order they came.
  std::map<std::string_view, std::vector<std::size_t>> batches;
  std::vector<Request> parsed(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      parsed[i] = parse_request(requests[i]);
      batches[parsed[i].deployment_key].push_back(i);
    } catch (const Malformed&) {
      answers[i] = kUnsupportedAnswer;
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
      answers[i] = parsed[i].refused_at <= now ? failure_answer({}, kTooLate)
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
      std::optional<std::vector<Value>> replies;
      // What is said while the batch is sent (connecting, a TLS session resumed) is said to
      // each of its callers, as each would have met it alone.
      said_.clear();
      std::string server;
      try {
        // The batch is waited for until its last caller's timeout; each caller whose timeout
        // comes sooner is answered then, as a server that does not reply would answer it alone.
        const auto deadline_of = [&](std::size_t i) { return unavailable_at(parsed[i]); };
        const std::size_t last = *std::max_element(
            batch.begin(), batch.end(),
            [&](std::size_t a, std::size_t b) { return deadline_of(a) < deadline_of(b); });
        std::vector<std::size_t> sooner;
        if (answer_now)
          std::copy_if(batch.begin(), batch.end(), std::back_inserter(sooner),
                       [&](std::size_t i) { return deadline_of(i) < deadline_of(last); });
        io::ActingWaiter answering_sooner(
            waiter,
            [&] {
              nanoseconds next = nanoseconds::max();
              for (const std::size_t i : sooner) next = std::min(next, deadline_of(i));
              return next;
            },
            [&] {
              const nanoseconds now = waiter.now();
              std::erase_if(sooner, [&](std::size_t i) {
                if (deadline_of(i) > now) return false;
                answer_now(i, timed_out_answer(parsed[i], waiter));
                return true;
              });
            });
        Deadline deadline = caller_deadline(parsed[last], deadline_of(last), answering_sooner);
        Topology& topology = deployment(parsed[last]);
        server = "Redis at " + topology.shown_url();
        replies = topology.pipeline(commands, deadline);
      } catch (...) {
        const std::string failure = current_failure_answer(std::exchange(said_, {}));
        for (const std::size_t i : batch) answers[i] = failure;
        continue;
      }
      const std::vector<std::string> said_in_batch = std::exchange(said_, {});
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

}  // namespace ratelimit::stores::redis
