#include "exec/admission.hpp"

#include <algorithm>

#include "backends/state_file_format.hpp"

namespace ratelimit::exec {
namespace {

using std::chrono::nanoseconds;

// How often a caller waiting for a --max-inflight slot looks again: flock cannot wait for any one
// of several locks.
constexpr nanoseconds kSlotPollInterval = std::chrono::milliseconds(10);

nanoseconds deadline_after(nanoseconds now, nanoseconds timeout) {
  return timeout > nanoseconds::max() - now ? nanoseconds::max() : now + timeout;
}

io::FileDescriptor try_any_slot(const backends::StateDirectory& directory, const std::string& key,
                                int max_inflight) {
  for (int index = 0; index < max_inflight; ++index) {
    io::FileDescriptor slot = directory.try_lock(backends::slot_file_name(key, index));
    if (slot) return slot;
  }
  return {};
}

}  // namespace

Admission admit(backends::BucketBackend& backend, const backends::StateDirectory& slots,
                const AdmissionRequest& request) {
  io::SignalGuard guard;
  const nanoseconds deadline = deadline_after(io::monotonic_now(), request.permits.timeout);
  // Returning drops the slot taken so far, if any.
  auto not_admitted = [&guard](AdmissionResult result) {
    return Admission{.result = result, .signal = guard.received(), .slot = {}};
  };

  io::FileDescriptor slot;
  if (request.max_inflight > 0) {
    while (!(slot = try_any_slot(slots, request.permits.key, request.max_inflight))) {
      const nanoseconds now = io::monotonic_now();
      if (now >= deadline) return not_admitted(AdmissionResult::refused);
      guard.wait_until(std::min(deadline, now + kSlotPollInterval));
      if (guard.received() != 0) return not_admitted(AdmissionResult::interrupted);
    }
  }

  backends::PermitRequest permits = request.permits;
  if (deadline != nanoseconds::max())
    permits.timeout = std::max(deadline - io::monotonic_now(), nanoseconds::zero());
  const backends::Reservation reservation = backend.reserve(permits);
  if (!reservation.granted) return not_admitted(AdmissionResult::refused);
  guard.wait_until(deadline_after(io::monotonic_now(), reservation.wait));
  if (guard.received() != 0) return not_admitted(AdmissionResult::interrupted);
  return Admission{.result = AdmissionResult::admitted, .signal = 0, .slot = std::move(slot)};
}

}  // namespace ratelimit::exec
