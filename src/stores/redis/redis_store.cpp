#include "stores/redis/redis_store.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>

#include "errors.hpp"
#include "format/escaping.hpp"
#include "format/quantities.hpp"
#include "stores/multi_key.hpp"
#include "stores/redis/redis_connection_transport.hpp"
#include "stores/redis/redis_script.hpp"
#include "stores/redis/redis_script_protocol.hpp"

namespace ratelimit::stores::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr std::string_view kKeyPrefix = "ratelimit:{";
constexpr std::string_view kKeySuffix = "}";

}  // namespace

std::string redis_key(const std::string& key) {
  return std::string(kKeyPrefix) + key + std::string(kKeySuffix);
}

Store::Store(Settings settings, Notify notify, Notify warn)
    : notify_(notify),
      timeout_(settings.timeout),
      failover_timeout_(settings.failover_timeout),
      topology_(std::move(settings), std::move(notify), std::move(warn)) {}

void Store::unexpected_reply(const Value& reply) const {
  throw StoreUnavailable(server() + ": " +
                         (reply.type == Value::Type::error
                              ? explain_refusal(reply.text)
                              : std::string("unexpected reply to the bucket script")));
}

Value Store::run_script(const std::string& key, std::vector<std::string> arguments,
                        Deadline& deadline) {
  return run_script_on({key}, std::move(arguments), deadline);
}

Value Store::run_script_on(const std::vector<std::string>& keys, std::vector<std::string> arguments,
                           Deadline& deadline) {
  std::vector<std::string> redis_keys;
  for (const std::string& key : keys) redis_keys.push_back(redis_key(key));
  const Value reply = send(redis_keys.front(), script_call(redis_keys, arguments), deadline);
  // No function: the script did not run (a server started again without persistence, a new
  // Cluster node), so loading it there and calling it again cannot book twice: the request's
  // policy sends the call again.
  if (function_missing(reply)) {
    const Value loaded = send(redis_keys.front(), library_load(), deadline);
    if (loaded.type == Value::Type::error) unexpected_reply(loaded);
    throw NotRun(NotRun::Reply::function_missing, server() + ": " + reply.text);
  }
  // A server started again that is still reading its data: nothing ran, and it will.
  if (reply.type == Value::Type::error && reply.text.starts_with("LOADING"))
    throw ConnectionLost(server() + ": " + reply.text, false);
  if (reply.type == Value::Type::error && reply.text.starts_with("CROSSSLOT")) {
    std::string names;
    for (const std::string& key : keys)
      names += (names.empty() ? "'" : ", '") + format::escaped_bytes(key) + "'";
    throw UsageError(fmt::format(
        "{}: keys {} are on different Cluster slots, and one call decides keys of one slot only: "
        "start their names with the same {{tag}} (e.g. {{crawl}}site:a and {{crawl}}all)",
        server(), names));
  }
  if (reply.type == Value::Type::error) {
    // The connection may be fine, but the server refuses (NOAUTH, OOM, BUSY, a broken script).
    unexpected_reply(reply);
  }
  return reply;
}

template <typename Attempt>
auto Store::with_retries(Deadline& deadline, Attempt attempt) {
  RetryPolicy policy(deadline, timeout_, failover_timeout_,
                     RetryPolicy::Waits::restarts_and_failovers, notify_, jitter_);
  RetryPolicy* const outer = std::exchange(retries_, &policy);
  try {
    auto result = policy.run(attempt);
    retries_ = outer;
    return result;
  } catch (...) {
    retries_ = outer;
    throw;
  }
}

Value Store::send(const std::string& bucket_key, const std::vector<std::string>& arguments,
                  Deadline& deadline) {
  if (retries_) retries_->sending(arguments);
  if (relay_) {
    std::optional<Value> reply;
    try {
      reply = relay_->command(bucket_key, arguments, deadline);
    } catch (const Failure& failure) {
      // The operation's deadline passed before the command went to the agent.
      throw StoreUnavailable(server() + ": " + failure.what());
    }
    if (reply) {
      // Answered after the operation's timeout: the agent followed a failover, as the direct path
      // does (RetryPolicy), and what follows (the call after loading the function) has a timeout
      // anew.
      if (deadline.passed()) deadline = deadline.renewed(timeout_);
      return std::move(*reply);
    }
    relay_.reset();
  }
  return topology_.command_once(bucket_key, arguments, deadline);
}

void Store::connect(const std::string& bucket_key, Deadline& deadline) {
  if (!relay_) topology_.connect(bucket_key, deadline);
}

Reservation Store::reserve(const PermitRequest& request, io::Waiter& waiter) {
  Deadline round_trip = operation_deadline(&waiter);
  if (request.deadline != nanoseconds::max())
    round_trip.refuse_after(std::max(request.deadline, waiter.now() + nanoseconds(kAnswerGrace)));
  try {
    // The reply lost may have been booked: sent again, the key may pay twice for this one
    // request, fewer grants, never more.
    return with_retries(round_trip, [&] {
      // Connected first, so that what is left of the request's timeout when the script runs is
      // what the server judges by.
      connect(redis_key(request.key), round_trip);
      const nanoseconds timeout =
          request.deadline == nanoseconds::max()
              ? nanoseconds::max()
              : std::max(request.deadline - waiter.now(), nanoseconds::zero());
      return reserve_at(request, timeout, std::nullopt, round_trip);
    });
  } catch (const Interrupted& interrupted) {
    Reservation reservation;
    reservation.signal = interrupted.signal;
    return reservation;
  } catch (const TooLate&) {
    return {};
  }
}

Reservation Store::reserve_at(const PermitRequest& request, nanoseconds timeout,
                              std::optional<std::int64_t> now_micros, io::Waiter* stop_waiter) {
  Deadline round_trip = operation_deadline(stop_waiter);
  return with_retries(round_trip,
                      [&] { return reserve_at(request, timeout, now_micros, round_trip); });
}

Reservation Store::reserve_at(const PermitRequest& request, nanoseconds timeout,
                              std::optional<std::int64_t> now_micros, Deadline& deadline) {
  validate(request.params);
  validate_permits(request.permits);
  const Value reply =
      run_script(request.key, encode_reserve(request, timeout, now_micros), deadline);
  DecodedReservation decoded = decode_reservation(reply, request, server());
  if (!decoded.problem.empty())
    notify_(fmt::format("key '{}': {} in Redis; starting a fresh bucket", request.key,
                        decoded.problem));
  return std::move(decoded.reservation);
}

KeysReservation Store::reserve_all(const std::vector<PermitRequest>& requests, io::Waiter& waiter) {
  check_keys_of_call(requests);
  if (requests.size() == 1) return BucketStore::reserve_all(requests, waiter);
  const nanoseconds request_deadline = requests.front().deadline;
  Deadline round_trip = operation_deadline(&waiter);
  if (request_deadline != nanoseconds::max())
    round_trip.refuse_after(std::max(request_deadline, waiter.now() + nanoseconds(kAnswerGrace)));
  try {
    // As reserve(): a reply lost is sent again, the keys may pay twice, never grant twice.
    return with_retries(round_trip, [&] {
      connect(redis_key(requests.front().key), round_trip);
      const nanoseconds timeout =
          request_deadline == nanoseconds::max()
              ? nanoseconds::max()
              : std::max(request_deadline - waiter.now(), nanoseconds::zero());
      return reserve_all_at(requests, timeout, std::nullopt, round_trip);
    });
  } catch (const Interrupted& interrupted) {
    KeysReservation interrupted_call;
    interrupted_call.call.signal = interrupted.signal;
    return interrupted_call;
  } catch (const TooLate&) {
    return {};
  }
}

KeysReservation Store::reserve_all_at(const std::vector<PermitRequest>& requests,
                                      nanoseconds timeout, std::optional<std::int64_t> now_micros) {
  Deadline round_trip = operation_deadline();
  return with_retries(round_trip,
                      [&] { return reserve_all_at(requests, timeout, now_micros, round_trip); });
}

KeysReservation Store::reserve_all_at(const std::vector<PermitRequest>& requests,
                                      nanoseconds timeout, std::optional<std::int64_t> now_micros,
                                      Deadline& deadline) {
  check_keys_of_call(requests);
  std::vector<std::string> keys;
  for (const PermitRequest& request : requests) {
    validate(request.params);
    validate_permits(request.permits);
    keys.push_back(request.key);
  }
  const Value reply =
      run_script_on(keys, encode_reserve_all(requests, timeout, now_micros), deadline);
  DecodedKeysReservation decoded = decode_reservations(reply, requests, server());
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (!decoded.problems[i].empty())
      notify_(fmt::format("key '{}': {} in Redis; starting a fresh bucket", requests[i].key,
                          decoded.problems[i]));
  return std::move(decoded.reservation);
}

std::optional<BucketStatus> Store::status_at(const std::string& key,
                                             std::optional<std::int64_t> now_micros) {
  Deadline round_trip = operation_deadline();
  return with_retries(round_trip, [&] {
    return decode_status(run_script(key, encode_status(now_micros), round_trip), key, server());
  });
}

std::vector<BucketStatus> Store::status(const std::optional<std::string>& key) {
  std::vector<std::string> keys;
  if (key) {
    keys.push_back(*key);
  } else {
    // A Cluster's masters each hold their own slots' keys; the listing is one operation, then
    // each key's status another.
    // A failover met is waited for (the master found again), a restart is not (each key's
    // status waits for it).
    Deadline listing = operation_deadline();
    RetryPolicy policy(listing, timeout_, failover_timeout_, RetryPolicy::Waits::failovers, notify_,
                       jitter_);
    policy.run([&] {
      topology_.for_each_master(listing, [&](Connection& master) {
        std::string cursor = "0";
        do {
          const Value reply = master.command(
              {"SCAN", cursor, "MATCH", std::string(kKeyPrefix) + "*" + std::string(kKeySuffix),
               "COUNT", "1000"},
              listing);
          if (reply.type != Value::Type::array || reply.elements.size() != 2 ||
              !is_text(reply.elements[0]) || reply.elements[1].type != Value::Type::array)
            unexpected_reply(reply);
          cursor = reply.elements[0].text;
          for (const Value& name : reply.elements[1].elements) {
            const std::string_view text = name.text;
            keys.emplace_back(text.substr(kKeyPrefix.size(),
                                          text.size() - kKeyPrefix.size() - kKeySuffix.size()));
          }
        } while (cursor != "0");
      });
    });
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  std::vector<BucketStatus> buckets;
  for (const std::string& name : keys) {
    if (auto bucket = status_at(name, std::nullopt)) buckets.push_back(std::move(*bucket));
  }
  return buckets;
}

bool Store::reset(const std::string& key) {
  Deadline round_trip = operation_deadline();
  const std::string bucket_key = redis_key(key);
  // DEL twice deletes what DEL once did.
  const Value reply = with_retries(round_trip, [&] {
    return send(bucket_key, {"DEL", bucket_key}, round_trip);
  });
  if (reply.type != Value::Type::integer) unexpected_reply(reply);
  return reply.integer > 0;
}

bool Store::set_rate(const RateChange& change) { return set_rate_at(change, std::nullopt); }

void Store::ping(const std::string& key, io::Waiter& waiter) {
  Deadline round_trip = operation_deadline(&waiter);
  const std::string bucket_key = redis_key(key);
  try {
    with_retries(round_trip, [&] {
      connect(bucket_key, round_trip);
      // A server that accepts connections may still be loading its data (-LOADING): not back.
      const Value reply = send(bucket_key, {"PING"}, round_trip);
      if (reply.type != Value::Type::status || reply.text != "PONG") unexpected_reply(reply);
      return true;
    });
  } catch (const Interrupted&) {
    throw StoreUnavailable(server() + ": not asked to the end");
  }
}

bool Store::give_back(const UnusedPermits& unused) { return give_back_at(unused, std::nullopt); }

bool Store::give_back_at(const UnusedPermits& unused, std::optional<std::int64_t> now_micros) {
  validate_permits(unused.permits);
  Deadline round_trip = operation_deadline();
  // Given back twice, permits would be granted twice: a lost reply is not sent again.
  return with_retries(round_trip, [&] {
    return decode_give_back(
        run_script(unused.key, encode_give_back(unused.permits, unused.booked, now_micros),
                   round_trip),
        server());
  });
}

std::optional<ThrottleResult> Store::throttle(const ThrottleRequest& request) {
  return throttle_at(request, std::nullopt);
}

std::optional<ThrottleResult> Store::throttle_at(const ThrottleRequest& request,
                                                 std::optional<std::int64_t> now_micros) {
  if (request.retry_after < nanoseconds::zero())
    throw UsageError("a negative Retry-After cannot be reported");
  Deadline round_trip = operation_deadline();
  // Sent again, a report belongs to the event the first began (it was sent before it): it cuts
  // nothing more and its pause ends where the first's does.
  return with_retries(round_trip, [&] {
    return decode_throttle(
        run_script(request.key, encode_throttle(request, now_micros), round_trip), server());
  });
}

nanoseconds Store::pause_left(const std::string& key) {
  const std::optional<BucketStatus> status = status_at(key, std::nullopt);
  return status ? status->paused_for : nanoseconds::zero();
}

bool Store::set_rate_at(const RateChange& change, std::optional<std::int64_t> now_micros) {
  BucketParams checked;
  checked.permits_per_second = change.permits_per_second;
  validate(checked);
  Deadline round_trip = operation_deadline();
  return with_retries(round_trip, [&] {
    return decode_set_rate(run_script(change.key,
                                      encode_set_rate(change.permits_per_second, change.schedule,
                                                      now_micros, change.settings),
                                      round_trip),
                           server());
  });
}

}  // namespace ratelimit::stores::redis
