#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

// Every error that ends the program with its own exit status. Lower rooms throw these; one ladder
// (cli::run_command, around the whole of main) maps each type to its code (cli/exit_codes.hpp) and
// prints "ratelimit: <what>". Any other std::system_error exits 74; anything unforeseen 70.
namespace ratelimit {

// Bad user input (64, EX_USAGE).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An input file that is missing or cannot be read (66, EX_NOINPUT).
class InputError : public std::runtime_error {
 public:
  // "NAME: <the errno's text>".
  InputError(int error, const std::string& name)
      : std::runtime_error(name + ": " + std::generic_category().message(error)) {}
  // A reason errno has no word for (an input that is also the output): the message alone.
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// The store of shared buckets cannot answer: a state directory that cannot be created or written,
// a server that cannot be reached (69, EX_UNAVAILABLE).
class StoreUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The state directory or a file in it could let another user tamper with the buckets, or holds a
// bucket written by another machine (77, EX_NOPERM).
class UnsafeStateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ratelimit
