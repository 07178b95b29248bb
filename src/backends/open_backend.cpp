#include "backends/open_backend.hpp"

#include <fmt/core.h>

#include "backends/state_file_backend.hpp"
#include "ratelimit/clock.hpp"

namespace ratelimit::backends {
namespace {

StateDirectory open_state_directory(const BackendOptions& options) {
  const std::string path = state_dir_from_environment(options.state_dir);
  try {
    return StateDirectory::open(path);
  } catch (const std::system_error& error) {
    throw BackendUnavailable(error.what());
  }
}

}  // namespace

std::unique_ptr<BucketBackend> open_backend(const BackendOptions& options) {
  return std::make_unique<StateFileBackend>(
      open_state_directory(options), system_clock(),
      HostId{.machine_id = read_machine_id(), .boot_id = read_boot_id()}, options.notify);
}

std::unique_ptr<InflightSlots> open_inflight_slots(const BackendOptions& options) {
  return std::make_unique<StateDirectorySlots>(open_state_directory(options));
}

}  // namespace ratelimit::backends
