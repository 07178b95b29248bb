#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stores/redis/redis_connection.hpp"

struct redisReply;

// RESP, Redis's own protocol, written and read by hiredis: the commands sent to a server, and
// the requests and answers that the host agent relays.
namespace ratelimit::stores::redis {

// A reply of hiredis's, copied out of it.
Value copy_reply(const redisReply& reply);

// `arguments` as one command of bulk strings (hiredis's redisFormatCommandArgv).
std::string resp_command(const std::vector<std::string>& arguments);

// `value` as RESP: what a server would send for it. An error's or a status's text is one line:
// a line break in it is written as a space, as Redis writes its own errors.
std::string resp_value(const Value& value);

// The one value that `text` holds, read by hiredis's redisReader; none if `text` is not one
// whole value of RESP (more, less, or anything else).
std::optional<Value> read_resp_value(std::string_view text);

}  // namespace ratelimit::stores::redis
