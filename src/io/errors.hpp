#pragma once

#include <system_error>

namespace ratelimit::io {

// An input file that is missing or cannot be read; main() exits 66 (EX_NOINPUT) for it, where
// other system errors exit 74.
class InputError : public std::system_error {
 public:
  using std::system_error::system_error;
};

}  // namespace ratelimit::io
