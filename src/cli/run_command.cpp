#include <fmt/core.h>

#include <exception>
#include <new>
#include <system_error>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "errors.hpp"

namespace ratelimit::cli {
namespace {

int report(const std::exception& error, int code) {
  fmt::print(stderr, "ratelimit: {}\n", error.what());
  return code;
}

}  // namespace

int run_command(const Command& command) {
  try {
    return command.run();
  } catch (const UsageError& error) {
    return report(error, exit_usage);
  } catch (const CLI::ParseError& error) {
    // A command line CLI11 refuses: its message as it words it.
    return report(error, exit_usage);
  } catch (const InputError& error) {
    return report(error, exit_no_input);
  } catch (const StoreUnavailable& error) {
    return report(error, exit_unavailable);
  } catch (const UnsafeStateError& error) {
    return report(error, exit_no_permission);
  } catch (const std::system_error& error) {
    return report(error, exit_io_error);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "ratelimit: out of memory\n");
    return exit_software;
  } catch (const std::exception& error) {
    // Never std::terminate's abort and core dump: a bug still ends with one line.
    return report(error, exit_software);
  } catch (...) {
    fmt::print(stderr, "ratelimit: unexpected failure\n");
    return exit_software;
  }
}

}  // namespace ratelimit::cli
