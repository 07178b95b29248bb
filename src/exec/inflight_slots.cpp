#include "exec/inflight_slots.hpp"

#include "backends/state_file/state_file_format.hpp"

namespace ratelimit::backends {

io::FileDescriptor StateDirectorySlots::try_take(const std::string& key, int max_inflight) {
  for (int index = 0; index < max_inflight; ++index) {
    io::FileDescriptor slot = unavailable_on_failure(
        directory_, [&] { return directory_.try_lock(slot_file_name(key, index)); });
    if (slot) return slot;
  }
  return {};
}

}  // namespace ratelimit::backends
