#include "exec/admission.hpp"

#include <algorithm>

namespace ratelimit::exec {
namespace {

using std::chrono::nanoseconds;

nanoseconds deadline_after(nanoseconds now, nanoseconds timeout) {
  return timeout > nanoseconds::max() - now ? nanoseconds::max() : now + timeout;
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

  std::optional<stores::KeySettings> followed;
  nanoseconds paused_for{0};
  for (;;) {
    const nanoseconds asked_at = waiter.now();
    const stores::Reservation reservation = store.reserve(request.permits, waiter);
    if (reservation.signal != 0)
      return not_admitted(AdmissionResult::interrupted, reservation.signal, followed);
    // Told it follows the key's settings, the caller says so whatever comes of the request.
    if (reservation.tell_followed) followed = reservation.followed;
    if (!reservation.granted) return not_admitted(AdmissionResult::refused, 0, followed);
    const nanoseconds granted_by = deadline_after(waiter.now(), reservation.wait);
    if (const int signal = waiter.wait_until(granted_by))
      return not_admitted(AdmissionResult::interrupted, signal, followed);
    paused_for += std::min(reservation.paused_for, reservation.wait);
    // A pause reported while this caller waited for its turn voids the turn (the pause absorbed
    // it): the caller waits the pause out and books again, so that nothing reaches the service
    // during a pause. Only on a key that was ever throttled: others pay no second look.
    const nanoseconds pause =
        reservation.backing_off ? store.pause_left(request.permits.key) : nanoseconds::zero();
    if (pause <= nanoseconds::zero())
      return Admission{.result = AdmissionResult::admitted,
                       .signal = 0,
                       .slot = std::move(slot),
                       .granted_from = deadline_after(asked_at, reservation.wait),
                       .granted_by = granted_by,
                       .followed = followed,
                       .paused_for = paused_for};
    const nanoseconds resumed = deadline_after(waiter.now(), pause);
    if (resumed > deadline) return not_admitted(AdmissionResult::refused, 0, followed);
    if (const int signal = waiter.wait_until(resumed))
      return not_admitted(AdmissionResult::interrupted, signal, followed);
    paused_for += pause;
  }
}

}  // namespace ratelimit::exec
