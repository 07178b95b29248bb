#include "backends/state_file/state_file_store.hpp"

#include "backends/state_file/state_file_backend.hpp"
#include "ratelimit/clock.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::backends {

std::unique_ptr<BucketBackend> open_state_file_store(
    const StateFileOptions& options, const std::function<void(const std::string&)>& notify) {
  return std::make_unique<StateFileBackend>(
      state::StateDirectory::open(options.directory), system_clock(),
      HostId{.machine_id = state::read_machine_id(), .boot_id = state::read_boot_id()}, notify);
}

std::string describe_store(const StateFileOptions& options) { return options.directory; }

}  // namespace ratelimit::backends
