#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/fallback_backend.hpp"
#include "backends/state_file_backend.hpp"
#include "cli/bucket_options.hpp"
#include "exec/admission.hpp"

namespace ratelimit::cli {

// Where the shared buckets are: options of exec, acquire, status and reset.
struct StoreOptions {
  std::string
      state_dir;  // empty: $RATELIMIT_STATE_DIR, $XDG_RUNTIME_DIR/ratelimit, /tmp/ratelimit-UID
  bool verbose = false;
  std::string redis;  // a Redis URL: buckets kept there instead of the state directory
  std::string redis_timeout = "1s";
  backends::OnUnavailable on_redis_error = backends::OnUnavailable::fail;
};

void add_store_options(CLI::App& app, StoreOptions& options);
// --on-redis-error, for the commands that take permits.
void add_redis_policy_option(CLI::App& app, StoreOptions& options);
// --key, checked to be a name the backends can keep.
CLI::Option* add_key_option(CLI::App& app, std::string& key);

// Opens the state directory (exit 77 if unsafe) for the store options given.
backends::StateFileBackend open_backend(const StoreOptions& options);
// The buckets the store options name: this host's state directory (exit 77 if unsafe), which
// also keeps the --max-inflight slots, and with --redis (or $RATELIMIT_REDIS) Redis in front of
// it under the --on-redis-error policy. Throws std::invalid_argument for a bad URL.
class SharedBuckets {
 public:
  explicit SharedBuckets(const StoreOptions& options);
  SharedBuckets(const SharedBuckets&) = delete;
  SharedBuckets& operator=(const SharedBuckets&) = delete;

  backends::BucketBackend& backend() { return redis_ ? *redis_ : local_; }
  const backends::StateDirectory& directory() const { return local_.directory(); }
  // Where the buckets are, for messages: Redis's URL (password hidden) or the state directory.
  const std::string& where() const { return where_; }

 private:
  backends::StateFileBackend local_;
  std::unique_ptr<backends::BucketBackend> redis_;  // uses local_ under --on-redis-error=local
  std::string where_;
};

// The options of the commands that take permits from a shared bucket (exec and acquire).
struct PermitOptions {
  BucketOptions bucket;
  StoreOptions store;
  std::string key = "default";
  std::int64_t permits = 1;
  bool try_only = false;
  std::string timeout;  // empty: wait as long as it takes
};

void add_permit_options(CLI::App& app, PermitOptions& options);

// Throws UsageError naming the bad value.
backends::PermitRequest to_permit_request(const PermitOptions& options);

// The exit status of an admission that was not granted: 75 refused, 128 + signal interrupted.
int exit_status_of_refusal(const exec::Admission& admission);

}  // namespace ratelimit::cli
