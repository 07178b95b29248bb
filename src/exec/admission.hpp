#pragma once

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

// Takes a --max-inflight slot among the lock files of `slots` (waiting for one), then books the
// permits from `backend` and waits until they are due, all within the request's timeout. Slots
// are per machine whatever the backend: their locks die with the processes holding them.
// SIGINT, SIGTERM and SIGHUP end the wait; the previous signal dispositions and mask are back in
// place on return.
Admission admit(backends::BucketBackend& backend, const backends::StateDirectory& slots,
                const AdmissionRequest& request);

}  // namespace ratelimit::exec
