#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace ratelimit::io {

// An input that is missing or cannot be read; main() exits 66 (EX_NOINPUT) for it, where
// other system errors exit 74.
class InputError : public std::runtime_error {
 public:
  // "NAME: <the errno's text>".
  InputError(int error, const std::string& name)
      : std::runtime_error(name + ": " + std::generic_category().message(error)) {}
  // A reason errno has no word for (an input that is also the output): the message alone.
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace ratelimit::io
