#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "io/exec.hpp"
#include "io/posix.hpp"

namespace ratelimit::io {

void keep_across_exec(const FileDescriptor& fd) {
  const int flags = ::fcntl(fd.get(), F_GETFD);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFD, flags & ~FD_CLOEXEC) != 0)
    throw_errno("keep descriptor across exec");
}

namespace {

// 0 if `path` is a file this process may execute, else the errno execve would report.
int check_executable(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return errno;
  if (S_ISDIR(status.st_mode)) return EACCES;
  return ::access(path.c_str(), X_OK) == 0 ? 0 : errno;
}

}  // namespace

int find_command(const std::string& name) {
  if (name.empty()) return ENOENT;
  if (name.find('/') != std::string::npos) return check_executable(name);
  // As execvp: PATH's entries in order (an empty entry is the current directory), EACCES if only
  // unusable files were found.
  const char* const path = std::getenv("PATH");
  const std::string_view entries = path ? path : "/usr/local/bin:/bin:/usr/bin";
  int error = ENOENT;
  std::size_t start = 0;
  while (start <= entries.size()) {
    const std::size_t end = std::min(entries.find(':', start), entries.size());
    const std::string_view directory = entries.substr(start, end - start);
    const int found =
        check_executable((directory.empty() ? "." : std::string(directory)) + "/" + name);
    if (found == 0) return 0;
    if (found == EACCES) error = EACCES;
    start = end + 1;
  }
  return error;
}

int replace_process(const std::vector<std::string>& argv) {
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (const std::string& arg : argv) pointers.push_back(const_cast<char*>(arg.c_str()));
  pointers.push_back(nullptr);
  ::execvp(pointers[0], pointers.data());
  return errno;
}

int run_to_completion(const std::vector<std::string>& argv) {
  const pid_t child = ::fork();
  if (child < 0) throw_errno("fork");
  if (child == 0) {
    const int error = replace_process(argv);
    ::_exit(error == ENOENT ? 127 : 126);
  }
  int status = 0;
  if (retry_on_eintr([&] { return ::waitpid(child, &status, 0); }) < 0) throw_errno("waitpid");
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace ratelimit::io
