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

  const nanoseconds asked_at = waiter.now();
  const stores::Reservation reservation = store.reserve(request.permits, waiter);
  if (reservation.signal != 0)
    return not_admitted(AdmissionResult::interrupted, reservation.signal);
  // Told it follows the key's settings, the caller says so whatever comes of the request.
  std::optional<stores::KeySettings> followed;
  if (reservation.tell_followed) followed = reservation.followed;
  if (!reservation.granted) return not_admitted(AdmissionResult::refused, 0, followed);
  const nanoseconds granted_by = deadline_after(waiter.now(), reservation.wait);
  if (const int signal = waiter.wait_until(granted_by))
    return not_admitted(AdmissionResult::interrupted, signal, followed);
  return Admission{.result = AdmissionResult::admitted,
                   .signal = 0,
                   .slot = std::move(slot),
                   .granted_from = deadline_after(asked_at, reservation.wait),
                   .granted_by = granted_by,
                   .followed = followed,
                   .paused_for = std::min(reservation.paused_for, reservation.wait)};
}

}  // namespace ratelimit::exec
