#pragma once

namespace ratelimit::cli {

// sysexits(3) codes and the shell's signal statuses; documented in the man page's EXIT STATUS.
enum ExitCode : int {
  exit_ok = 0,
  exit_usage = 64,          // EX_USAGE: malformed option, rate, size or duration
  exit_no_input = 66,       // EX_NOINPUT: an input file is missing or unreadable
  exit_unavailable = 69,    // EX_UNAVAILABLE: the shared store cannot be reached
  exit_software = 70,       // EX_SOFTWARE: an unforeseen failure (a bug, or memory refused)
  exit_io_error = 74,       // EX_IOERR: a read or write failed
  exit_temp_failure = 75,   // EX_TEMPFAIL: --try found no permit free now
  exit_no_permission = 77,  // EX_NOPERM: unsafe state directory
  exit_cannot_execute = 126,
  exit_command_not_found = 127,
  exit_interrupted = 130,  // 128 + SIGINT
  exit_broken_pipe = 141,  // 128 + SIGPIPE: downstream closed early, as cat
  exit_terminated = 143,   // 128 + SIGTERM
};

}  // namespace ratelimit::cli
