#pragma once

#include <string>
#include <vector>

#include "io/posix.hpp"

namespace ratelimit::io {

// Lets `fd` survive exec (it was opened close-on-exec).
void keep_across_exec(const FileDescriptor& fd);

// Whether `name` would be found by replace_process: 0, or the errno it would fail with (ENOENT when
// no PATH entry has it, EACCES when one has it but may not run it), so that a command that cannot
// run is refused before it uses up a permit.
int find_command(const std::string& name);

// Replaces this process with `argv` (argv[0] searched in PATH, scripts without #! run by sh).
// Returns only if that failed, with the errno.
int replace_process(const std::vector<std::string>& argv);

// How a command run by run_to_completion() ended.
struct CommandEnd {
  // Its exit status, 128 + the signal that killed it, or 127/126 as a shell when it could not run.
  int status = 0;
  // The first stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) this process received while the
  // command ran, or 0.
  int stop_signal = 0;
};

// Runs `argv` as replace_process() would, in a child process, and waits for it. A stop signal
// sent to this process alone (kill, a supervisor) is passed on to the command, which decides what
// it means, as it would if it had replaced this process; one from the terminal (Ctrl-C) already
// reached the command's process group and is not sent twice. Those this process ignores stay
// ignored.
CommandEnd run_to_completion(const std::vector<std::string>& argv);

}  // namespace ratelimit::io
