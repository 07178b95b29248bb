#include "exec/admission.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace ratelimit::exec {
namespace {

using std::chrono::nanoseconds;

nanoseconds deadline_after(nanoseconds now, nanoseconds timeout) {
  return timeout > nanoseconds::max() - now ? nanoseconds::max() : now + timeout;
}

// The store's answer to the request's keys: the call's reservation (with the first key's
// settings followed), and what the other keys said.
struct KeysAnswer {
  stores::Reservation reservation;
  std::vector<std::optional<stores::KeySettings>> more_followed{};
  std::string held_by{};
};

KeysAnswer ask_store(stores::BucketStore& store, io::Waiter& waiter,
                     const AdmissionRequest& request) {
  if (request.more_keys.empty()) return {.reservation = store.reserve(request.permits, waiter)};
  std::vector<stores::PermitRequest> keys{request.permits};
  keys.insert(keys.end(), request.more_keys.begin(), request.more_keys.end());
  const stores::KeysReservation decision = store.reserve_all(keys, waiter);
  KeysAnswer answer{.reservation = decision.call};
  // Cut short before any key was read (a lock not taken in time, a signal): nothing to tell.
  if (decision.keys.size() != keys.size()) return answer;
  answer.reservation.followed = decision.keys.front().followed;
  answer.reservation.tell_followed = decision.keys.front().tell_followed;
  for (std::size_t i = 1; i < keys.size(); ++i)
    answer.more_followed.push_back(decision.keys[i].tell_followed ? decision.keys[i].followed
                                                                  : std::nullopt);
  if (decision.held_by) answer.held_by = keys[*decision.held_by].key;
  return answer;
}

}  // namespace

Admission admit(stores::BucketStore& store, exec::InflightSlots* slots, io::Waiter& waiter,
                const AdmissionRequest& request) {
  const nanoseconds deadline = request.permits.deadline;
  // Returning drops the slot taken so far, if any.
  auto not_admitted = [](AdmissionResult result, int signal,
                         std::optional<stores::KeySettings> followed = {}) {
    return Admission{.result = result,
                     .signal = signal,
                     .slot = {},
                     .granted_from = {},
                     .granted_by = {},
                     .followed = std::move(followed)};
  };

  io::FileDescriptor slot;
  if (request.max_inflight > 0) {
    while (!(slot = slots->try_take(request.permits.key, request.max_inflight))) {
      const nanoseconds now = waiter.now();
      if (now >= deadline) return not_admitted(AdmissionResult::refused, 0);
      if (const int signal = waiter.wait_until(std::min(deadline, now + kSlotPollInterval)))
        return not_admitted(AdmissionResult::interrupted, signal);
    }
  }

  const nanoseconds asked_at = waiter.now();
  const KeysAnswer answer = ask_store(store, waiter, request);
  const stores::Reservation& reservation = answer.reservation;
  if (reservation.signal != 0)
    return not_admitted(AdmissionResult::interrupted, reservation.signal);
  // Told it follows the key's settings, the caller says so whatever comes of the request.
  std::optional<stores::KeySettings> followed;
  if (reservation.tell_followed) followed = reservation.followed;
  const auto told = [&](Admission admission) {
    admission.more_followed = answer.more_followed;
    admission.held_by = answer.held_by;
    admission.wait = reservation.wait;
    return admission;
  };
  if (!reservation.granted) return told(not_admitted(AdmissionResult::refused, 0, followed));
  const nanoseconds granted_by = deadline_after(waiter.now(), reservation.wait);
  if (const int signal = waiter.wait_until(granted_by))
    return told(not_admitted(AdmissionResult::interrupted, signal, followed));
  return told(Admission{.result = AdmissionResult::admitted,
                        .signal = 0,
                        .slot = std::move(slot),
                        .granted_from = deadline_after(asked_at, reservation.wait),
                        .granted_by = granted_by,
                        .followed = followed});
}

}  // namespace ratelimit::exec
