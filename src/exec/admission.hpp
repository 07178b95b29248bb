#pragma once

#include <chrono>
#include <string>

#include "backends/bucket_backend.hpp"
#include "backends/state_directory.hpp"
#include "io/posix.hpp"

// The exec engine: admits one command (or one `acquire`) through a shared bucket, optionally
// within a limit of commands of the key running at once.
namespace ratelimit::exec {

struct AdmissionRequest {
  backends::PermitRequest permits;
  int max_inflight = 0;  // 0: no limit
};

enum class AdmissionResult { admitted, refused, interrupted };

struct Admission {
  AdmissionResult result = AdmissionResult::refused;
  int signal = 0;  // interrupted: the stop signal received
  // With --max-inflight: the slot's lock, held as long as this descriptor (or the command that
  // inherits it) lives.
  io::FileDescriptor slot;
};

// What admission needs of the outside world: the monotonic clock (the backend's timeline), waits
// that a stop signal cuts short, and the --max-inflight slot locks. SystemWaitingRoom is the real
// one; the unit tests use a fake clock and fake slots.
class WaitingRoom {
 public:
  virtual ~WaitingRoom() = default;
  virtual std::chrono::nanoseconds now() = 0;
  // Waits until `deadline`; returns the stop signal that ended the wait early, or 0.
  virtual int wait_until(std::chrono::nanoseconds deadline) = 0;
  // One of the key's `max_inflight` slots if one is free now; an empty descriptor otherwise.
  virtual io::FileDescriptor try_take_slot(const std::string& key, int max_inflight) = 0;
};

// The monotonic clock, SignalGuard's wait (SIGINT, SIGTERM and SIGHUP end it; the previous signal
// dispositions and mask are back in place when it is destroyed) and the slot lock files of a
// state directory, whatever the backend: their locks die with the processes holding them.
class SystemWaitingRoom final : public WaitingRoom {
 public:
  explicit SystemWaitingRoom(const backends::StateDirectory& slots) : slots_(slots) {}
  std::chrono::nanoseconds now() override;
  int wait_until(std::chrono::nanoseconds deadline) override;
  io::FileDescriptor try_take_slot(const std::string& key, int max_inflight) override;

 private:
  const backends::StateDirectory& slots_;
  io::SignalGuard guard_;
};

// How often a caller waiting for a --max-inflight slot looks again: flock cannot wait for any one
// of several locks.
inline constexpr std::chrono::nanoseconds kSlotPollInterval = std::chrono::milliseconds(10);

// Takes a --max-inflight slot (waiting for one), then books the permits from `backend` and waits
// until they are due, all within the request's timeout.
Admission admit(backends::BucketBackend& backend, WaitingRoom& room,
                const AdmissionRequest& request);
// The same in a SystemWaitingRoom on `slots`, gone when this returns: the signal dispositions and
// mask are the caller's again before it can exec the command.
Admission admit(backends::BucketBackend& backend, const backends::StateDirectory& slots,
                const AdmissionRequest& request);

}  // namespace ratelimit::exec
