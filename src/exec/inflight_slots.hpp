#pragma once

#include <string>
#include <string_view>

#include "io/posix.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::exec {

// --max-inflight: at most N holders of a key at once. Per host, whatever store keeps the bucket:
// a slot is a lock that dies with the process holding it, which only a local lock can promise.
class InflightSlots {
 public:
  virtual ~InflightSlots() = default;
  // One of the key's `max_inflight` slots if one is free now; an empty descriptor otherwise. The
  // slot is held as long as the descriptor (or a copy a command inherits) is open.
  virtual io::FileDescriptor try_take(const std::string& key, int max_inflight) = 0;
};

// Slots as lock files KEY.slot-I in a state directory.
// The lock file of slot `index` of `key`'s --max-inflight.
std::string slot_file_name(std::string_view key, int index);

class StateDirectorySlots final : public InflightSlots {
 public:
  explicit StateDirectorySlots(state::StateDirectory directory)
      : directory_(std::move(directory)) {}
  io::FileDescriptor try_take(const std::string& key, int max_inflight) override;

 private:
  state::StateDirectory directory_;
};

}  // namespace ratelimit::exec
