#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "backends/state_file_backend.hpp"
#include "cli/bucket_options.hpp"
#include "exec/admission.hpp"

namespace ratelimit::cli {

// Where the shared buckets are: options of exec, acquire, status and reset.
struct StoreOptions {
  std::string
      state_dir;  // empty: $RATELIMIT_STATE_DIR, $XDG_RUNTIME_DIR/ratelimit, /tmp/ratelimit-UID
  bool verbose = false;
};

void add_store_options(CLI::App& app, StoreOptions& options);
// --key, checked to be a name the backends can keep.
CLI::Option* add_key_option(CLI::App& app, std::string& key);

// Opens the state directory (exit 77 if unsafe) for the store options given.
backends::StateFileBackend open_backend(const StoreOptions& options);

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
