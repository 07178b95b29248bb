#pragma once

#include <functional>
#include <memory>
#include <string>

#include "stores/bucket_store.hpp"

// The state-file store as open_store() chooses it: its options, and opening it with them.
namespace ratelimit::stores::state_file {

struct Options {
  std::string
      directory;  // the state directory, as resolved once (state::state_dir_from_environment)
};

// This user's buckets on this host. Throws UnsafeStateError (77) for a directory another user
// could tamper with, StoreUnavailable (69) for one that cannot be created or opened. `notify`
// is told why a record was discarded (--verbose).
std::unique_ptr<BucketStore> open_store(const Options& options,
                                        const std::function<void(const std::string&)>& notify);

// Where the buckets are, for messages: the directory.
std::string describe_store(const Options& options);

}  // namespace ratelimit::stores::state_file
