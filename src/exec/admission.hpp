#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/control.hpp"
#include "exec/inflight_slots.hpp"
#include "io/posix.hpp"
#include "io/waiter.hpp"
#include "stores/bucket_store.hpp"

// The exec engine: admits one command (or one `acquire`) through a shared bucket, optionally
// within a limit of commands of the key running at once.
namespace ratelimit::exec {

// A call of several keys waiting: for what, which key holds it, and what each key asked.
struct KeysWait {
  control::CallWait what = control::CallWait::turn;
  std::vector<std::string> keys{};  // the call's, in its order
  // Each key's own wait for the turn (before the others'), in the order of `keys`; none but for
  // the turn.
  std::vector<std::chrono::nanoseconds> waits{};
  std::string held_by{};  // the key whose turn, slot or pause the call waits for
  // When the wait ends, on the waiter's timeline; nanoseconds::max(): not known (a slot, without
  // a deadline).
  std::chrono::nanoseconds until{0};
};
// Shows a wait (e.g. as a status record) for as long as what it returns lives.
using ShowWait = std::function<std::shared_ptr<void>(const KeysWait&)>;

struct AdmissionRequest {
  // Its deadline bounds the whole admission: the wait for a slot, for the store and for the
  // permits.
  stores::PermitRequest permits;
  // The call's other keys (a second --key and on), decided with `permits` all or nothing
  // (BucketStore::reserve_all), with its deadline; the --max-inflight slot is the first key's.
  std::vector<stores::PermitRequest> more_keys{};
  int max_inflight = 0;  // 0: no limit
  // Called when a call of several keys starts waiting for a slot, its turn or a pause; what it
  // returns is kept until that wait ends, however it ends. Unset: the wait is shown nowhere.
  ShowWait show_wait{};
};

enum class AdmissionResult { admitted, refused, interrupted };

struct Admission {
  AdmissionResult result = AdmissionResult::refused;
  int signal = 0;  // interrupted: the stop signal received
  // With --max-inflight: the slot's lock, held as long as this descriptor (or the command that
  // inherits it) lives.
  io::FileDescriptor slot;
  // Admitted: the store's moment for the permits lies from granted_from to granted_by, on the
  // waiter's timeline (monotonic_now()): the request's sending and its answer's arrival, each
  // plus the wait the store gave. The wait ended at granted_by.
  std::chrono::nanoseconds granted_from{0};
  std::chrono::nanoseconds granted_by{0};
  // The key's settings that this request followed though its own differ, when its caller is to
  // be told (stores::Reservation::followed).
  std::optional<stores::KeySettings> followed;
  // Admitted: how much of the wait was the key's pause (stores::Reservation::paused_for).
  std::chrono::nanoseconds paused_for{0};
  // The same for each of more_keys, in their order (none when it was not asked).
  std::vector<std::optional<stores::KeySettings>> more_followed{};
  // Of several keys, the one whose moment came last (the wait was its, or it refused the call);
  // empty when every key granted at once, or with one key.
  std::string held_by{};
  // The wait the store gave (granted), or would have given (refused).
  std::chrono::nanoseconds wait{0};
};

// How often a caller waiting for a --max-inflight slot looks again: flock cannot wait for any one
// of several locks.
inline constexpr std::chrono::nanoseconds kSlotPollInterval = std::chrono::milliseconds(10);

// Takes a --max-inflight slot from `slots` (waiting for one; `slots` may be null without
// max_inflight), then books the permits from `store` and waits until they are due, all by the
// request's deadline and through `waiter`, so that a stop signal ends any of the waits.
Admission admit(stores::BucketStore& store, exec::InflightSlots* slots, io::Waiter& waiter,
                const AdmissionRequest& request);

}  // namespace ratelimit::exec
