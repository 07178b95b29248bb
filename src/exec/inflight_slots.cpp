#include "exec/inflight_slots.hpp"

#include "state/key_file_names.hpp"

namespace ratelimit::exec {

std::string slot_file_name(std::string_view key, int index) {
  return state::key_file_stem(key) + ".slot-" + std::to_string(index);
}

io::FileDescriptor StateDirectorySlots::try_take(const std::string& key, int max_inflight) {
  for (int index = 0; index < max_inflight; ++index) {
    io::FileDescriptor slot = state::unavailable_on_failure(
        directory_, [&] { return directory_.try_lock(slot_file_name(key, index)); });
    if (slot) return slot;
  }
  return {};
}

}  // namespace ratelimit::exec
