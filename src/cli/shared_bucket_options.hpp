#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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

// One --key of a call that names several, and the bucket options that follow it.
struct KeyOptions {
  std::string key;
  BucketOptions bucket;
};

// --key read in order with the bucket options (exec, acquire and the pipe): each --key after the
// first starts a group of its own, and the bucket options that follow a --key are that key's.
struct KeyGroups {
  // The options of the key named last (with one --key, its own; those given before the first
  // --key count as its own too); keys_of_call() gives every key its own.
  BucketOptions bucket;
  // The first --key; empty: none given (exec takes its command's name, acquire refuses, a pipe
  // has a bucket of its own).
  std::string key;
  // A second --key and on, as read: each one's bucket options are those that follow it, the last
  // one's still in `bucket`; the first key's then in first_key_bucket.
  std::vector<KeyOptions> more_keys;
  BucketOptions first_key_bucket;
  // Bucket options came before the first --key: with several keys, whose they are is unclear.
  bool bucket_options_before_key = false;
};

// Declares --key (`description` its help) to read into `groups`, and reads the bucket options,
// declared before, in the order given.
void add_key_groups_option(CLI::App& app, KeyGroups& groups, const std::string& description);

// The options of the commands that take permits from a shared bucket (exec and acquire).
struct PermitOptions : KeyGroups {
  StoreOptions store;
  std::int64_t permits = 1;
  bool try_only = false;
  std::optional<std::chrono::nanoseconds> timeout;  // none: wait as long as it takes
};

void add_permit_options(CLI::App& app, PermitOptions& options);
// The subcommand `name` of `app` that takes permits, with their options, and then does
// `then_what` ("exit 0"); `key_default` says what --key is when not given.
CLI::App* add_permit_subcommand(CLI::App& app, const std::string& name,
                                const std::string& then_what, PermitOptions& options,
                                const std::string& key_default);

// Every key of the call, first --key first, each with the bucket options that follow it (with
// one key, as today: all of them). Throws UsageError (64) when several keys are named and bucket
// options come before the first, a key is named twice, or more than stores::kMaxKeysPerCall.
std::vector<KeyOptions> keys_of_call(const KeyGroups& options);

// The request of `options` for `bucket` (their bucket) made at `now` (its deadline is --try's or
// --timeout's from then on). Throws UsageError naming the bad value.
stores::PermitRequest to_permit_request(const PermitOptions& options, const ParsedBucket& bucket,
                                        std::chrono::nanoseconds now);

// The one sequence of exec and acquire: request -> store -> admission -> exit status. Runs
// `admitted` once the permits are due (the stop signals' dispositions and mask are the caller's
// again by then) and returns its status; else 75 refused, 128 + signal interrupted. A call of
// several keys shows its wait for its turn to `status` as a call of `command` ("exec", "acquire").
int admit_then(std::string_view command, const PermitOptions& options, int max_inflight,
               const std::function<int(exec::Admission&)>& admitted);

// The bucket of a command that takes permits from `key` (exec, acquire, a pipe with --key),
// counting `counted`: its options' (bucket_of()), or, when they give none of --rate, --quota,
// --burst, --warmup, --start-full and --pay-first, the key's own settings, which the command then
// follows. Throws UsageError (64) with a hint when it gives none and the key has no bucket.
ParsedBucket bucket_or_key(const BucketOptions& options, const std::string& key,
                           const StoreOptions& store_options, stores::BucketStore& store,
                           format::Counted counted);

// A key's settings as `status` gives them.
stores::KeySettings settings_of(const stores::BucketStatus& key);
// "rate 4/s, burst 1s, quota 3/h", the rates in `notation`.
std::string describe_settings(const stores::KeySettings& settings,
                              const format::Notation& notation);

// The one line on stderr that tells a caller it follows the settings of `key`, not its own
// (`own`, as its options `written` give them), and the `ratelimit set --key` that makes its own
// the key's.
void announce_followed(const std::string& key, const stores::KeySettings& key_settings,
                       const stores::KeySettings& own, const BucketOptions& written,
                       const format::Notation& notation);

}  // namespace ratelimit::cli
