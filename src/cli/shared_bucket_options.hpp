#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/bucket_options.hpp"
#include "exec/admission.hpp"
#include "format/quantities.hpp"
#include "stores/open_store.hpp"

namespace ratelimit::cli {

// Where the shared buckets are: options of exec, acquire, status, reset, set and the pipe.
struct StoreOptions {
  // The state directory, resolved once when the command line is parsed: --state-dir, else
  // $RATELIMIT_STATE_DIR, else $XDG_RUNTIME_DIR/ratelimit, else a place of the user's own
  // (state::choose_state_dir). What needs it
  // (the state-file store, exec's slots, the pipe's control FIFO, set, status) is handed this.
  std::string state_dir;
  // -v: why a record was discarded, which Redis node answered, TLS sessions resumed; -vv: also
  // when acquire's permits were granted.
  int verbose = 0;
  // The stores' own options as they read them (stores/store_option.hpp), with the state
  // directory and --verbose once the command line is parsed.
  stores::StoresOptions stores;
  // Redis not through the host agent: --no-agent, $RATELIMIT_NO_AGENT, and the commands that take
  // no permits (status, reset, set).
  bool no_agent = true;
};

// Declares the stores' options on `app`; options.state_dir and options.stores are complete
// once `app` is parsed.
void add_store_options(CLI::App& app, StoreOptions& options);
// The stores' options for the commands that take permits (exec, acquire, pipe --key):
// --on-redis-error.
void add_redis_policy_option(CLI::App& app, StoreOptions& options);
// --key, checked to be a name the stores can keep.
CLI::Option* add_key_option(CLI::App& app, std::string& key);

// "no bucket 'KEY' in STORE" (66), the key escaped as status shows it.
InputError no_bucket(const std::string& key, const StoreOptions& options);
// False when looking would find nothing: no Redis, and no state directory (which status and reset
// do not create).
bool may_hold_buckets(const StoreOptions& options);

// The options of the commands that take permits from a shared bucket (exec and acquire).
struct PermitOptions {
  BucketOptions bucket;
  StoreOptions store;
  std::string key;  // empty: none given (exec takes its command's name, acquire refuses)
  std::int64_t permits = 1;
  bool try_only = false;
  std::optional<std::chrono::nanoseconds> timeout;  // none: wait as long as it takes
};

void add_permit_options(CLI::App& app, PermitOptions& options);

// The request of `options` for `bucket` (their bucket) made at `now` (its deadline is --try's or
// --timeout's from then on). Throws UsageError naming the bad value.
stores::PermitRequest to_permit_request(const PermitOptions& options, const ParsedBucket& bucket,
                                        std::chrono::nanoseconds now);

// The one sequence of exec and acquire: request -> store -> admission -> exit status. Runs
// `admitted` once the permits are due (the stop signals' dispositions and mask are the caller's
// again by then) and returns its status; else 75 refused, 128 + signal interrupted.
int admit_then(const PermitOptions& options, int max_inflight,
               const std::function<int(exec::Admission&)>& admitted);

// What a key's users agree on: its parameters and its timetable (empty: none).
struct KeyParams {
  BucketParams params;
  std::string timetable;
  std::vector<QuotaParams> quotas{};
};

// The one line on stderr that says a request changed a shared key's parameters, its rates in
// `notation` (the request's).
void announce_replaced_params(const std::string& key, const KeyParams& replaced,
                              const KeyParams& now_in_force, const format::Notation& notation = {});

}  // namespace ratelimit::cli
