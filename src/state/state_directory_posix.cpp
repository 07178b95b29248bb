#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>

#include "state/state_directory.hpp"

namespace ratelimit::state {
namespace {

struct stat stat_of(int fd, const std::string& path) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) io::throw_errno("stat " + path);
  return status;
}

// Owned by this user and writable by no one else: nobody else can replace or edit what it holds.
void check_ownership(const struct stat& status, const std::string& path, const char* what) {
  if (status.st_uid != ::geteuid())
    throw UnsafeStateError(fmt::format("{} '{}' belongs to uid {}, not to you (uid {})", what, path,
                                       status.st_uid, ::geteuid()));
  if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw UnsafeStateError(fmt::format(
        "{} '{}' is writable by group or others (mode {:04o}): make it 0700 or use --state-dir",
        what, path, status.st_mode & 07777));
}

// Only a regular file can hold a record: anything else was put there by someone else.
void check_regular_file(const struct stat& status, const std::string& path) {
  if (!S_ISREG(status.st_mode))
    throw UnsafeStateError(fmt::format("state file '{}' is not a regular file", path));
}

const char* getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

std::string LockedFile::read(std::size_t max_bytes) const {
  // One byte more than the largest record tells a longer file from a record.
  std::string bytes(max_bytes + 1, '\0');
  const ssize_t count =
      io::retry_on_eintr([&] { return ::pread(fd_.get(), bytes.data(), bytes.size(), 0); });
  if (count < 0) io::throw_errno("read state file");
  bytes.resize(static_cast<std::size_t>(count));
  return bytes;
}

void LockedFile::replace(std::string_view bytes) {
  // Locked before it takes the name, so the lock stays with whoever holds the current file.
  fd_ = directory_->write_and_rename(name_, name_ + ".new", bytes, true);
}

StateDirectory StateDirectory::open(const std::string& path) {
  const auto unavailable = [&path](std::string_view what) {
    return StoreUnavailable(fmt::format("{} state directory '{}': {}", what, path,
                                        std::generic_category().message(errno)));
  };
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) throw unavailable("create");
  io::FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat link_status {};
  if (!fd && (errno == ELOOP || errno == ENOTDIR) && ::lstat(path.c_str(), &link_status) == 0 &&
      S_ISLNK(link_status.st_mode))
    throw UnsafeStateError(fmt::format(
        "state directory '{}' is a symbolic link: refusing to follow it (give its target with "
        "--state-dir)",
        path));
  if (!fd) {
    const int error = errno;
    // Another user's directory at our path (one we may not even enter) is unsafe, not missing.
    struct stat status {};
    if (::lstat(path.c_str(), &status) == 0) check_ownership(status, path, "state directory");
    errno = error;
    throw unavailable("open");
  }
  check_ownership(stat_of(fd.get(), path), path, "state directory");
  return StateDirectory(std::move(fd), path);
}

io::FileDescriptor StateDirectory::open_file(const std::string& name, bool create) const {
  const std::string path = path_ + "/" + name;
  // O_NONBLOCK: a FIFO or device planted at the path must not hang us before fstat rejects it.
  io::FileDescriptor fd(io::retry_on_eintr([&] {
    return ::openat(fd_.get(), name.c_str(),
                    O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (create ? O_CREAT : 0), 0600);
  }));
  if (!fd) {
    if (errno == ENOENT && !create) return fd;
    if (errno == ELOOP)
      throw UnsafeStateError(
          fmt::format("state file '{}' is a symbolic link: refusing to follow it", path));
    const int error = errno;
    // Something else at the path that cannot be opened as a file (a directory, a socket) is
    // refused as a FIFO or a device that can is.
    struct stat status {};
    if (::fstatat(fd_.get(), name.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0)
      check_regular_file(status, path);
    errno = error;
    io::throw_errno("open state file '" + path + "'");
  }
  const struct stat status = stat_of(fd.get(), path);
  check_regular_file(status, path);
  check_ownership(status, path, "state file");
  // Another name for the same file (a hard link to one of the user's own files, planted or not)
  // would be overwritten with a record.
  if (status.st_nlink > 1)
    throw UnsafeStateError(
        fmt::format("state file '{}' has {} links: refusing to write a file that has other names",
                    path, status.st_nlink));
  return fd;
}

std::optional<LockedFile> StateDirectory::lock_file(const std::string& name, LockKind kind,
                                                    bool create) const {
  for (;;) {
    io::FileDescriptor fd = open_file(name, create);
    if (!fd) return std::nullopt;
    const int operation = kind == LockKind::shared ? LOCK_SH : LOCK_EX;
    if (io::retry_on_eintr([&] { return ::flock(fd.get(), operation); }) != 0)
      io::throw_errno("lock state file '" + path_ + "/" + name + "'");
    // A reset may have removed the file between open and lock: its state would be lost.
    // A replace() renamed a new file over it meanwhile: that one is current.
    if (stat_of(fd.get(), path_ + "/" + name).st_nlink > 0)
      return LockedFile(std::move(fd), *this, name);
  }
}

LockWait StateDirectory::lock_until(const std::string& name, io::Waiter& waiter,
                                    std::chrono::nanoseconds deadline) const {
  constexpr std::chrono::nanoseconds kFirstRetry = std::chrono::microseconds(100);
  constexpr std::chrono::nanoseconds kLongestRetry = std::chrono::milliseconds(10);
  std::chrono::nanoseconds retry = kFirstRetry;
  io::FileDescriptor fd = open_file(name, true);
  while (true) {
    if (io::retry_on_eintr([&] { return ::flock(fd.get(), LOCK_EX | LOCK_NB); }) == 0) {
      // A reset may have removed the file between open and lock: its state would be lost.
      if (stat_of(fd.get(), path_ + "/" + name).st_nlink > 0)
        return {.file = LockedFile(std::move(fd), *this, name), .signal = 0};
      fd = open_file(name, true);
      continue;
    }
    if (errno != EWOULDBLOCK) io::throw_errno("lock state file '" + path_ + "/" + name + "'");
    const std::chrono::nanoseconds now = waiter.now();
    if (now >= deadline) return {};
    if (const int signal = waiter.wait_until(std::min(deadline, now + retry)))
      return {.file = {}, .signal = signal};
    retry = std::min(retry * 2, kLongestRetry);
  }
}

LockedFile StateDirectory::lock(const std::string& name, LockKind kind) const {
  return *lock_file(name, kind, true);
}

std::optional<LockedFile> StateDirectory::lock_existing(const std::string& name,
                                                        LockKind kind) const {
  return lock_file(name, kind, false);
}

io::FileDescriptor StateDirectory::try_lock(const std::string& name) const {
  io::FileDescriptor fd = open_file(name, true);
  if (io::retry_on_eintr([&] { return ::flock(fd.get(), LOCK_EX | LOCK_NB); }) == 0) return fd;
  if (errno != EWOULDBLOCK) io::throw_errno("lock '" + path_ + "/" + name + "'");
  return {};
}

io::FileDescriptor StateDirectory::make_fifo(const std::string& name) const {
  ::unlinkat(fd_.get(), name.c_str(), 0);
  if (::mkfifoat(fd_.get(), name.c_str(), 0600) != 0) return {};
  // Opened for reading and writing so that it never reports end-of-file between senders.
  io::FileDescriptor fifo(io::retry_on_eintr([&] {
    return ::openat(fd_.get(), name.c_str(), O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  }));
  struct stat status {};
  if (!fifo || ::fstat(fifo.get(), &status) != 0 || !S_ISFIFO(status.st_mode)) {
    ::unlinkat(fd_.get(), name.c_str(), 0);
    return {};
  }
  return fifo;
}

io::FileDescriptor StateDirectory::open_fifo_for_writing(const std::string& name) const {
  io::FileDescriptor fifo(io::retry_on_eintr([&] {
    return ::openat(fd_.get(), name.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  }));
  if (!fifo && errno != ENXIO) io::throw_errno(path_ + "/" + name);
  return fifo;
}

bool StateDirectory::is_fifo(const std::string& name) const {
  struct stat status {};
  return ::fstatat(fd_.get(), name.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISFIFO(status.st_mode);
}

io::FileDescriptor StateDirectory::replace_unlocked(const std::string& name,
                                                    std::string_view bytes) const {
  return write_and_rename(name, name + ".new", bytes, false);
}

void StateDirectory::replace_shared(const std::string& name, std::string_view bytes) const {
  // The pid keeps other processes' new files apart, the count this process's threads'.
  static std::atomic<unsigned> written{0};
  write_and_rename(name, fmt::format("{}.{}-{}.new", name, ::getpid(), written++), bytes, false);
}

namespace {

// The process that wrote `name` if it is a new file of replace_shared ("NAME.PID-N.new").
std::optional<pid_t> shared_writer(std::string_view name) {
  constexpr std::string_view kSuffix = ".new";
  if (!name.ends_with(kSuffix)) return std::nullopt;
  name.remove_suffix(kSuffix.size());
  const std::size_t dot = name.rfind('.');
  const std::size_t dash = name.rfind('-');
  if (dot == std::string_view::npos || dash == std::string_view::npos || dash < dot)
    return std::nullopt;
  const auto is_number = [](std::string_view digits) {
    return !digits.empty() &&
           std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const std::string_view pid = name.substr(dot + 1, dash - dot - 1);
  if (!is_number(pid) || !is_number(name.substr(dash + 1))) return std::nullopt;
  pid_t writer = 0;
  if (std::from_chars(pid.data(), pid.data() + pid.size(), writer).ec != std::errc() || writer <= 0)
    return std::nullopt;
  return writer;
}

}  // namespace

void StateDirectory::remove_abandoned_shared(std::string_view prefix) const {
  for (const std::string& name : file_names()) {
    if (!name.starts_with(prefix)) continue;
    const std::optional<pid_t> writer = shared_writer(name);
    // EPERM: alive, another user's (a pid reused since).
    if (!writer || ::kill(*writer, 0) == 0 || errno != ESRCH) continue;
    struct stat status {};
    if (::fstatat(fd_.get(), name.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(status.st_mode) && status.st_uid == ::geteuid())
      ::unlinkat(fd_.get(), name.c_str(), 0);
  }
}

io::FileDescriptor StateDirectory::write_and_rename(const std::string& name,
                                                    const std::string& new_name,
                                                    std::string_view bytes, bool lock) const {
  ::unlinkat(fd_.get(), new_name.c_str(), 0);
  io::FileDescriptor fd(io::retry_on_eintr([&] {
    return ::openat(fd_.get(), new_name.c_str(),
                    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  }));
  if (!fd) io::throw_errno("create '" + path_ + "/" + new_name + "'");
  auto fail = [&](int error, const std::string& what) {
    ::unlinkat(fd_.get(), new_name.c_str(), 0);
    throw std::system_error(error, std::generic_category(),
                            what + " '" + path_ + "/" + new_name + "'");
  };
  if (lock && io::retry_on_eintr([&] { return ::flock(fd.get(), LOCK_EX | LOCK_NB); }) != 0)
    fail(errno, "lock");
  const ssize_t count =
      io::retry_on_eintr([&] { return ::write(fd.get(), bytes.data(), bytes.size()); });
  if (count < 0 || static_cast<std::size_t>(count) != bytes.size())
    fail(count < 0 ? errno : ENOSPC, "write");
  if (::renameat(fd_.get(), new_name.c_str(), fd_.get(), name.c_str()) != 0) fail(errno, "rename");
  return fd;
}

std::optional<std::string> StateDirectory::read_regular(const std::string& name,
                                                        std::size_t max_bytes) const {
  return read_file(name, max_bytes, false);
}

std::optional<std::string> StateDirectory::read_private(const std::string& name,
                                                        std::size_t max_bytes) const {
  return read_file(name, max_bytes, true);
}

std::optional<std::string> StateDirectory::read_file(const std::string& name, std::size_t max_bytes,
                                                     bool private_only) const {
  const io::FileDescriptor fd(io::retry_on_eintr([&] {
    return ::openat(fd_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  }));
  struct stat status {};
  if (!fd || ::fstat(fd.get(), &status) != 0 || !S_ISREG(status.st_mode)) return std::nullopt;
  if (private_only && (status.st_uid != ::geteuid() || (status.st_mode & 077) != 0))
    return std::nullopt;
  std::string bytes(max_bytes + 1, '\0');
  const ssize_t count =
      io::retry_on_eintr([&] { return ::pread(fd.get(), bytes.data(), bytes.size(), 0); });
  if (count < 0) return std::nullopt;
  bytes.resize(static_cast<std::size_t>(count));
  return bytes;
}

std::vector<std::string> StateDirectory::file_names() const {
  // fdopendir takes ownership of its descriptor: give it a copy.
  const int copy = ::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) io::throw_errno("open state directory '" + path_ + "'");
  DIR* directory = ::fdopendir(copy);
  if (directory == nullptr) {
    ::close(copy);
    io::throw_errno("list state directory '" + path_ + "'");
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(directory)) names.emplace_back(entry->d_name);
  ::closedir(directory);
  std::sort(names.begin(), names.end());
  return names;
}

bool StateDirectory::remove(const std::string& name) const {
  if (::unlinkat(fd_.get(), name.c_str(), 0) == 0) return true;
  if (errno == ENOENT) return false;
  io::throw_errno("remove '" + path_ + "/" + name + "'");
}

std::string choose_state_dir(std::string_view option, std::string_view ratelimit_state_dir,
                             std::string_view xdg_runtime_dir, const PrivatePlaces& places) {
  if (!option.empty()) return std::string(option);
  if (!ratelimit_state_dir.empty()) return std::string(ratelimit_state_dir);
  if (!xdg_runtime_dir.empty()) return std::string(xdg_runtime_dir) + "/ratelimit";
  if (!places.runtime_dir.empty()) return places.runtime_dir + "/ratelimit";
  if (!places.state_home.empty()) return places.state_home + "/ratelimit";
  return "/tmp/ratelimit-" + std::to_string(places.uid);
}

namespace {

// A directory of this user's own that no one else can replace (its parent decides that, and
// /run/user and the homes are the system's): an existing directory owned by `uid`.
bool is_own_directory(const std::string& path, uid_t uid) {
  struct stat status {};
  return !path.empty() && path.front() == '/' && ::stat(path.c_str(), &status) == 0 &&
         S_ISDIR(status.st_mode) && status.st_uid == uid;
}

// `path` and its missing parents, each 0700 (as the XDG base directories are made); errors are
// left to the state directory's own creation to report.
void make_parents(const std::string& path) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1))
    ::mkdir(path.substr(0, slash).c_str(), 0700);
}

}  // namespace

PrivatePlaces find_private_places(uid_t uid) {
  PrivatePlaces places{.uid = uid, .runtime_dir = {}, .state_home = {}};
  if (const std::string runtime = "/run/user/" + std::to_string(uid);
      is_own_directory(runtime, uid))
    places.runtime_dir = runtime;
  const std::string xdg_state_home = getenv_or_empty("XDG_STATE_HOME");
  // The XDG base directory specification: a relative path is to be ignored.
  if (xdg_state_home.starts_with('/')) {
    places.state_home = xdg_state_home;
  } else if (const std::string home = getenv_or_empty("HOME"); is_own_directory(home, uid)) {
    // $HOME as cron, su and login set it. (Not the password database: its NSS modules would be
    // loaded into a static binary.)
    places.state_home = home + "/.local/state";
  }
  return places;
}

std::string state_dir_from_environment(std::string_view option) {
  const std::string_view ratelimit_state_dir = getenv_or_empty("RATELIMIT_STATE_DIR");
  const std::string_view xdg_runtime_dir = getenv_or_empty("XDG_RUNTIME_DIR");
  // Looked for only when needed: each is a system call or two on every command.
  if (!option.empty() || !ratelimit_state_dir.empty() || !xdg_runtime_dir.empty())
    return choose_state_dir(option, ratelimit_state_dir, xdg_runtime_dir, {});
  const PrivatePlaces places = find_private_places(::geteuid());
  const std::string chosen = choose_state_dir(option, ratelimit_state_dir, xdg_runtime_dir, places);
  if (places.runtime_dir.empty() && !places.state_home.empty()) make_parents(chosen);
  return chosen;
}

namespace {

// The first line of a small system file; empty if it cannot be read.
std::string read_id_file(const char* path) {
  io::FileDescriptor fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  char bytes[64];
  const ssize_t count = io::retry_on_eintr([&] { return ::read(fd.get(), bytes, sizeof bytes); });
  if (count <= 0) return {};
  std::string id(bytes, static_cast<std::size_t>(count));
  id.resize(std::min(id.find('\n'), id.size()));
  return id;
}

}  // namespace

std::string read_boot_id() { return read_id_file("/proc/sys/kernel/random/boot_id"); }

std::string read_machine_id() {
  std::string id = read_id_file("/etc/machine-id");
  return id.empty() ? read_id_file("/var/lib/dbus/machine-id") : id;
}

}  // namespace ratelimit::state
