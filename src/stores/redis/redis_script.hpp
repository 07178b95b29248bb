#pragma once

#include <string_view>

namespace ratelimit::stores::redis {

// redis_bucket.lua, built in (redis_script.cpp.in) as a Redis function library (FUNCTION LOAD),
// and the name of its function (FCALL). Both carry the file's SHA-1: each version of ratelimit
// loads and calls its own beside the others'.
extern const std::string_view kRedisBucketLibrary;
extern const std::string_view kRedisBucketFunction;

}  // namespace ratelimit::stores::redis
