#include "exec/admission.hpp"

#include <algorithm>
#include <string>
#include <utility>
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
  std::vector<nanoseconds> key_waits{};  // each key's own, with several keys
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
  for (const stores::Reservation& key : decision.keys) answer.key_waits.push_back(key.wait);
  return answer;
}

// `wait` shown (request.show_wait) with the call's keys, for as long as what this returns lives;
// nothing for a call of one key.
std::shared_ptr<void> show(const AdmissionRequest& request, KeysWait wait) {
  if (!request.show_wait || request.more_keys.empty()) return nullptr;
  wait.keys = {request.permits.key};
  for (const stores::PermitRequest& key : request.more_keys) wait.keys.push_back(key.key);
  return request.show_wait(wait);
}

// Waits until `granted_by` for the call's turn, shown meanwhile when a key of several holds it;
// the stop signal that ended the wait, or 0.
int wait_for_turn(io::Waiter& waiter, const AdmissionRequest& request, const KeysAnswer& answer,
                  nanoseconds granted_by) {
  std::shared_ptr<void> shown;
  if (!answer.held_by.empty() && answer.reservation.wait > nanoseconds::zero())
    shown = show(request, {.what = control::CallWait::turn,
                           .waits = answer.key_waits,
                           .held_by = answer.held_by,
                           .until = granted_by});
  return waiter.wait_until(granted_by);
}

// The longest pause left on any of the request's keys, and the key of it.
std::pair<nanoseconds, std::string> longest_pause_left(stores::BucketStore& store,
                                                       const AdmissionRequest& request) {
  std::pair<nanoseconds, std::string> longest{store.pause_left(request.permits.key),
                                              request.permits.key};
  for (const stores::PermitRequest& key : request.more_keys)
    if (const nanoseconds pause = store.pause_left(key.key); pause > longest.first)
      longest = {pause, key.key};
  return longest;
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
    std::shared_ptr<void> shown;  // the wait for a slot, once there is one
    while (!(slot = slots->try_take(request.permits.key, request.max_inflight))) {
      if (!shown)
        shown = show(
            request,
            {.what = control::CallWait::slot, .held_by = request.permits.key, .until = deadline});
      const nanoseconds now = waiter.now();
      if (now >= deadline) return not_admitted(AdmissionResult::refused, 0);
      if (const int signal = waiter.wait_until(std::min(deadline, now + kSlotPollInterval)))
        return not_admitted(AdmissionResult::interrupted, signal);
    }
  }

  std::optional<stores::KeySettings> followed;
  nanoseconds paused_for{0};
  for (;;) {
    const nanoseconds asked_at = waiter.now();
    const KeysAnswer answer = ask_store(store, waiter, request);
    const stores::Reservation& reservation = answer.reservation;
    const auto told = [&](Admission admission) {
      admission.more_followed = answer.more_followed;
      admission.held_by = answer.held_by;
      admission.wait = reservation.wait;
      return admission;
    };
    if (reservation.signal != 0)
      return not_admitted(AdmissionResult::interrupted, reservation.signal, followed);
    // Told it follows the key's settings, the caller says so whatever comes of the request.
    if (reservation.tell_followed) followed = reservation.followed;
    if (!reservation.granted) return told(not_admitted(AdmissionResult::refused, 0, followed));
    const nanoseconds granted_by = deadline_after(waiter.now(), reservation.wait);
    if (const int signal = wait_for_turn(waiter, request, answer, granted_by))
      return told(not_admitted(AdmissionResult::interrupted, signal, followed));
    paused_for += std::min(reservation.paused_for, reservation.wait);
    // A pause reported while this caller waited for its turn voids the turn (the pause absorbed
    // it): the caller waits the pause out and books again, so that nothing reaches the service
    // during a pause. Only on a key that was ever throttled: others pay no second look.
    const auto [pause, paused_key] = reservation.backing_off
                                         ? longest_pause_left(store, request)
                                         : std::pair<nanoseconds, std::string>{};
    if (pause <= nanoseconds::zero())
      return told(Admission{.result = AdmissionResult::admitted,
                            .signal = 0,
                            .slot = std::move(slot),
                            .granted_from = deadline_after(asked_at, reservation.wait),
                            .granted_by = granted_by,
                            .followed = followed,
                            .paused_for = paused_for});
    const nanoseconds resumed = deadline_after(waiter.now(), pause);
    if (resumed > deadline) return told(not_admitted(AdmissionResult::refused, 0, followed));
    const std::shared_ptr<void> shown =
        show(request, {.what = control::CallWait::pause, .held_by = paused_key, .until = resumed});
    if (const int signal = waiter.wait_until(resumed))
      return told(not_admitted(AdmissionResult::interrupted, signal, followed));
    paused_for += pause;
  }
}

}  // namespace ratelimit::exec
