#include "stores/state_file/open_state_file_store.hpp"

#include "ratelimit/clock.hpp"
#include "state/state_directory.hpp"
#include "stores/state_file/state_file_store.hpp"

namespace ratelimit::stores::state_file {

std::unique_ptr<BucketStore> open_store(const Options& options,
                                        const std::function<void(const std::string&)>& notify) {
  return std::make_unique<Store>(
      state::StateDirectory::open(options.directory), system_clock(),
      HostId{.machine_id = state::read_machine_id(), .boot_id = state::read_boot_id()}, notify);
}

std::string describe_store(const Options& options) { return options.directory; }

}  // namespace ratelimit::stores::state_file
