#include "backends/open_backend.hpp"

#include <fmt/core.h>

#include "backends/redis/redis_backend.hpp"
#include "backends/redis/redis_url.hpp"
#include "backends/state_file/state_file_backend.hpp"
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

std::unique_ptr<BucketBackend> open_state_file_backend(const BackendOptions& options) {
  return std::make_unique<StateFileBackend>(
      open_state_directory(options), system_clock(),
      HostId{.machine_id = read_machine_id(), .boot_id = read_boot_id()}, options.notify);
}

}  // namespace

std::unique_ptr<BucketBackend> open_backend(const BackendOptions& options) {
  if (options.redis_url.empty()) return open_state_file_backend(options);
  auto redis = std::make_unique<RedisBackend>(
      parse_redis_url(options.redis_url), options.redis_timeout, options.notify, options.redis_tls);
  if (!options.redis_tls.verify)
    options.warn("--redis-tls-insecure: the Redis server's certificate and name are not checked");
  return std::make_unique<FallbackBackend>(
      std::move(redis), options.on_redis_error,
      [options] { return open_state_file_backend(options); }, options.warn);
}

std::unique_ptr<InflightSlots> open_inflight_slots(const BackendOptions& options) {
  return std::make_unique<StateDirectorySlots>(open_state_directory(options));
}

}  // namespace ratelimit::backends
