#pragma once

#include <string>
#include <vector>

#include "io/posix.hpp"

namespace ratelimit::io {

// Lets `fd` survive exec (it was opened close-on-exec).
void keep_across_exec(const FileDescriptor& fd);

// Replaces this process with `argv` (argv[0] searched in PATH, scripts without #! run by sh).
// Returns only if that failed, with the errno.
int replace_process(const std::vector<std::string>& argv);

}  // namespace ratelimit::io
