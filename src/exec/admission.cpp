#include "exec/admission.hpp"

#include <algorithm>

#include "backends/state_file_format.hpp"

namespace ratelimit::exec {
namespace {

using std::chrono::nanoseconds;

nanoseconds deadline_after(nanoseconds now, nanoseconds timeout) {
  return timeout > nanoseconds::max() - now ? nanoseconds::max() : now + timeout;
}

}  // namespace

nanoseconds SystemWaitingRoom::now() { return io::monotonic_now(); }

int SystemWaitingRoom::wait_until(nanoseconds deadline) {
  guard_.wait_until(deadline);
  return guard_.received();
}

io::FileDescriptor SystemWaitingRoom::try_take_slot(const std::string& key, int max_inflight) {
  for (int index = 0; index < max_inflight; ++index) {
    io::FileDescriptor slot = slots_.try_lock(backends::slot_file_name(key, index));
    if (slot) return slot;
  }
  return {};
}

Admission admit(backends::BucketBackend& backend, WaitingRoom& room,
                const AdmissionRequest& request) {
  const nanoseconds deadline = deadline_after(room.now(), request.permits.timeout);
  // Returning drops the slot taken so far, if any.
  auto not_admitted = [](AdmissionResult result, int signal) {
    return Admission{.result = result, .signal = signal, .slot = {}};
  };

  io::FileDescriptor slot;
  if (request.max_inflight > 0) {
    while (!(slot = room.try_take_slot(request.permits.key, request.max_inflight))) {
      const nanoseconds now = room.now();
      if (now >= deadline) return not_admitted(AdmissionResult::refused, 0);
      if (const int signal = room.wait_until(std::min(deadline, now + kSlotPollInterval)))
        return not_admitted(AdmissionResult::interrupted, signal);
    }
  }

  backends::PermitRequest permits = request.permits;
  if (deadline != nanoseconds::max())
    permits.timeout = std::max(deadline - room.now(), nanoseconds::zero());
  const backends::Reservation reservation = backend.reserve(permits);
  if (!reservation.granted) return not_admitted(AdmissionResult::refused, 0);
  if (const int signal = room.wait_until(deadline_after(room.now(), reservation.wait)))
    return not_admitted(AdmissionResult::interrupted, signal);
  return Admission{.result = AdmissionResult::admitted, .signal = 0, .slot = std::move(slot)};
}

Admission admit(backends::BucketBackend& backend, const backends::StateDirectory& slots,
                const AdmissionRequest& request) {
  SystemWaitingRoom room(slots);
  return admit(backend, room, request);
}

}  // namespace ratelimit::exec
