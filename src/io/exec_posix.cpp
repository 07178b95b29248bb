#include <fcntl.h>
#include <unistd.h>

#include "io/exec.hpp"

namespace ratelimit::io {

void keep_across_exec(const FileDescriptor& fd) {
  const int flags = ::fcntl(fd.get(), F_GETFD);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFD, flags & ~FD_CLOEXEC) != 0)
    throw_errno("keep descriptor across exec");
}

int replace_process(const std::vector<std::string>& argv) {
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (const std::string& arg : argv) pointers.push_back(const_cast<char*>(arg.c_str()));
  pointers.push_back(nullptr);
  ::execvp(pointers[0], pointers.data());
  return errno;
}

}  // namespace ratelimit::io
