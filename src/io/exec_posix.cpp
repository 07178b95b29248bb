#include <fcntl.h>
#include <signal.h>
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

CommandEnd run_to_completion(const std::vector<std::string>& argv) {
  // The child's end and the stop signals not ignored, taken one at a time: blocked from before
  // the fork, so that none is missed or ends this process while the command runs.
  sigset_t waited;
  sigemptyset(&waited);
  sigaddset(&waited, SIGCHLD);
  const sigset_t stops = stop_signal_set();
  for (int signal_number = 1; signal_number < NSIG; ++signal_number) {
    struct sigaction action {};
    if (sigismember(&stops, signal_number) == 1 &&
        ::sigaction(signal_number, nullptr, &action) == 0 && action.sa_handler != SIG_IGN)
      sigaddset(&waited, signal_number);
  }
  // They wait for sigwaitinfo.
  const BlockedSignals blocked(waited);
  const pid_t child = ::fork();
  if (child < 0) throw_errno("fork");
  if (child == 0) {
    blocked.restore();
    const int error = replace_process(argv);
    ::_exit(error == ENOENT ? 127 : 126);
  }
  CommandEnd end;
  int status = 0;
  for (;;) {
    siginfo_t info{};
    if (::sigwaitinfo(&waited, &info) < 0) {
      if (errno == EINTR) continue;
      throw_errno("sigwaitinfo");
    }
    if (info.si_signo == SIGCHLD) {
      const pid_t ended = retry_on_eintr([&] { return ::waitpid(child, &status, WNOHANG); });
      if (ended < 0) throw_errno("waitpid");
      if (ended == child) break;
      continue;
    }
    if (end.stop_signal == 0) end.stop_signal = info.si_signo;
    // The terminal's signals come from the kernel, to the whole foreground process group.
    if (info.si_code != SI_KERNEL) ::kill(child, info.si_signo);
  }
  end.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return end;
}

}  // namespace ratelimit::io
