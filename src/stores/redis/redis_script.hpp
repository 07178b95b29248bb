#pragma once

#include <string_view>

namespace ratelimit::stores::redis {

// redis_bucket.lua, built in (redis_script.cpp.in), and its SHA-1 for EVALSHA.
extern const std::string_view kRedisBucketScript;
extern const std::string_view kRedisBucketScriptSha1;

}  // namespace ratelimit::stores::redis
