#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "stores/agent_link.hpp"
#include "stores/bucket_store.hpp"
#include "stores/redis/redis_options.hpp"

// The Redis store as open_store() chooses it: opening it with its options (redis_options.hpp).
namespace ratelimit::stores::redis {

// Buckets shared by every host that reaches the server; connects at the first call. Throws
// UsageError (64) for a bad URL, naming it without its password. `notify` is told why a record
// was discarded (--verbose), `warn` that the server's certificate goes unchecked or that Sentinel
// has two masters.
std::unique_ptr<BucketStore> open_store(const Options& options,
                                        const std::function<void(const std::string&)>& notify,
                                        const std::function<void(const std::string&)>& warn);

// Where the buckets are, for messages: "Redis at URL", the password hidden.
std::string describe_store(const Options& options);

}  // namespace ratelimit::stores::redis
