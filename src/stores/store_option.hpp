#pragma once

#include <chrono>
#include <functional>
#include <string_view>

// A store's command-line options, declared in the store's own folder with what reads each value
// into the store's typed options (for example redis/redis_options.cpp). The command line declares
// each one on its parser (cli/shared_bucket_options.cpp), and its --help and typo hints show them
// as declared here, so adding an option to a store touches that store's folder only. The parser
// itself stays in cli/: nothing here knows CLI11.
namespace ratelimit::stores {

// What an option's value is written as. The command line reads a duration with the one parser of
// durations every option shares (500ms, 10s, 2m) before the store checks its bounds.
enum class OptionKind { flag, text, duration };

// A value as the command line hands it to a store.
struct GivenValue {
  std::string_view text;                 // as written; empty for a flag
  std::chrono::nanoseconds duration{0};  // OptionKind::duration: `text` read as a duration
};

// How an option is written and shown.
struct OptionText {
  std::string_view name = {};  // "--redis-timeout"
  OptionKind kind = OptionKind::text;
  std::string_view value_name = {};  // the value as --help shows it, "DURATION"; empty for a flag
  std::string_view value_said = {};  // as an error says the value is missing: "a DURATION"
  std::string_view help = {};
  std::string_view environment = {};  // read from this variable when the option is not given
  std::string_view needs = {};        // given only together with this other option of the store
  // Declared only on the commands that take permits (exec, acquire, a pipe with --key).
  bool for_permits = false;
};

template <typename Options>
struct StoreOption {
  OptionText text;
  // Reads the option's value into `options`; throws UsageError naming the bad value.
  std::function<void(Options& options, const GivenValue& value)> read;
};

}  // namespace ratelimit::stores
