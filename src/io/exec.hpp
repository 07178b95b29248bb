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

// Runs `argv` as replace_process() would, in a child process, and waits for it: its exit status,
// 128 + the signal that killed it, or 127/126 as a shell when it could not run.
int run_to_completion(const std::vector<std::string>& argv);

}  // namespace ratelimit::io
