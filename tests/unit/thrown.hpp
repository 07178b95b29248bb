#pragma once

#include <functional>
#include <string>
#include <utility>

namespace ratelimit {

// The message of the `Error` that `call(arguments...)` throws; "accepted" if it throws none.
template <typename Error, typename Call, typename... Arguments>
std::string message_thrown(Call&& call, Arguments&&... arguments) {
  try {
    std::invoke(std::forward<Call>(call), std::forward<Arguments>(arguments)...);
  } catch (const Error& error) {
    return error.what();
  }
  return "accepted";
}

}  // namespace ratelimit
