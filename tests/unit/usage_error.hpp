#pragma once

#include <functional>
#include <string>
#include <utility>

#include "errors.hpp"

namespace ratelimit {

// The message of the UsageError that `call(arguments...)` throws; "accepted" if it throws none.
template <typename Call, typename... Arguments>
std::string usage_error_of(Call&& call, Arguments&&... arguments) {
  try {
    std::invoke(std::forward<Call>(call), std::forward<Arguments>(arguments)...);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "accepted";
}

}  // namespace ratelimit
