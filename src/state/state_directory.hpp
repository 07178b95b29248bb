#pragma once

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "errors.hpp"
#include "io/posix.hpp"
#include "io/waiter.hpp"

// The state directory (state_directory_posix.cpp): a checked, private directory, its files
// opened without following links, and flock.
namespace ratelimit::state {

class StateDirectory;

// A state file held open under flock; closing it (the destructor) releases the lock.
class LockedFile {
 public:
  // The file's bytes, at most `max_bytes` + 1 of them (a file longer than `max_bytes` is read as
  // that many, for the caller to refuse).
  std::string read(std::size_t max_bytes) const;
  // The file's name in its directory.
  const std::string& name() const { return name_; }
  // Replaces the file's content whole: written to a new file beside it, locked, then renamed
  // over it, so that a crash at any point leaves either the old record or the new one, never a
  // torn one. Waiters on the old file find it unlinked and take the new one.
  void replace(std::string_view bytes);

 private:
  friend class StateDirectory;
  LockedFile(io::FileDescriptor fd, const StateDirectory& directory, std::string name)
      : fd_(std::move(fd)), directory_(&directory), name_(std::move(name)) {}
  io::FileDescriptor fd_;
  const StateDirectory* directory_;
  std::string name_;
};

enum class LockKind { shared, exclusive };

// What waiting for a lock ended with: the locked file, or none because the deadline came first or
// a stop signal (`signal`) ended the wait.
struct LockWait {
  std::optional<LockedFile> file;
  int signal = 0;
};

// The state directory, held by a descriptor so that files are opened relative to the directory
// that was checked, whatever happens to its path afterwards.
class StateDirectory {
 public:
  // Opens `path`, creating it 0700 if missing. Throws UnsafeStateError unless it is a directory
  // (not a symbolic link to one: another user may have planted it in /tmp) owned by this user
  // and not writable by group or others; StoreUnavailable if it cannot be created or opened.
  static StateDirectory open(const std::string& path);

  // Opens `name` (creating it 0600) and waits for the lock.
  LockedFile lock(const std::string& name, LockKind kind) const;
  // The same for the exclusive lock, waiting through `waiter` until `deadline` at most (a
  // deadline already past takes the lock only if it is free now). flock cannot wait with a
  // timeout nor race-free with a signal, so the lock is tried anew after waits that grow from
  // 0.1 to 10 ms.
  LockWait lock_until(const std::string& name, io::Waiter& waiter,
                      std::chrono::nanoseconds deadline) const;
  // The same for a file that may not exist: none if it does not.
  std::optional<LockedFile> lock_existing(const std::string& name, LockKind kind) const;
  // Opens `name` (creating it 0600) and takes its exclusive lock if free now; an empty descriptor
  // if another holds it. The lock lasts as long as the returned descriptor or a copy of it.
  io::FileDescriptor try_lock(const std::string& name) const;

  // Makes the FIFO `name` (0600), replacing a leftover of that name, and opens it for reading
  // and writing without blocking; an empty descriptor if it cannot.
  io::FileDescriptor make_fifo(const std::string& name) const;
  // Opens the FIFO `name` for writing without blocking; an empty descriptor when nobody reads it
  // (ENXIO). Throws std::system_error (ENOENT when it is missing).
  io::FileDescriptor open_fifo_for_writing(const std::string& name) const;
  bool is_fifo(const std::string& name) const;

  // Gives `name` the content `bytes` whole (written to "name.new", then renamed over it), without
  // a lock: for a file only this process writes, which it may rewrite through the descriptor
  // returned. Throws std::system_error.
  io::FileDescriptor replace_unlocked(const std::string& name, std::string_view bytes) const;
  // The same for a file that other processes and threads may replace at the same time: each
  // writes a new file of its own ("name.PID-N.new"), and the last to be renamed wins.
  void replace_shared(const std::string& name, std::string_view bytes) const;
  // Removes the new files of replace_shared that a process left behind when it died between
  // writing and renaming one, for names that start with `prefix`: only this user's, only those of
  // a process that is gone (a live one may be about to rename its own). Throws std::system_error
  // when the directory cannot be listed.
  void remove_abandoned_shared(std::string_view prefix) const;
  // The content of the regular file `name`, at most `max_bytes` + 1 of it (more is not its kind);
  // nullopt if there is none (or something else is there).
  std::optional<std::string> read_regular(const std::string& name, std::size_t max_bytes) const;
  // The same, but nullopt too unless the file is this user's and no one else may read or write it
  // (as every file made here is): for a secret.
  std::optional<std::string> read_private(const std::string& name, std::size_t max_bytes) const;

  std::vector<std::string> file_names() const;
  // Removes `name`; false if it did not exist.
  bool remove(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  friend class LockedFile;
  StateDirectory(io::FileDescriptor fd, std::string path)
      : fd_(std::move(fd)), path_(std::move(path)) {}
  io::FileDescriptor open_file(const std::string& name, bool create) const;
  std::optional<LockedFile> lock_file(const std::string& name, LockKind kind, bool create) const;
  // Writes `bytes` to `new_name` (a leftover of a crash is removed, never opened: it might be
  // another name of some other file), locked first if `lock` says so, then renames it over
  // `name`. Returns the new file's descriptor. Throws std::system_error.
  io::FileDescriptor write_and_rename(const std::string& name, const std::string& new_name,
                                      std::string_view bytes, bool lock) const;
  std::optional<std::string> read_file(const std::string& name, std::size_t max_bytes,
                                       bool private_only) const;

  io::FileDescriptor fd_;
  std::string path_;
};

// The one rule of the state directory's exit statuses: a system call that fails in it (a read-only
// or full file system, no permission) makes the store unavailable: `operation`'s
// std::system_error is thrown as StoreUnavailable (69). What is there and should not be (another
// user's directory, a link, a FIFO) is thrown as UnsafeStateError (77) by StateDirectory itself.
template <typename Operation>
auto unavailable_on_failure(const StateDirectory& directory, Operation operation) {
  try {
    return operation();
  } catch (const std::system_error& error) {
    throw StoreUnavailable("state directory '" + directory.path() + "': " + error.what());
  }
}

// The places of this user's own that no other user can take first, for the state directory when
// the environment names none: empty where there is none.
struct PrivatePlaces {
  unsigned uid = 0;
  std::string runtime_dir;  // /run/user/UID, when it is a directory of the user's
  std::string state_home;   // $XDG_STATE_HOME, else ~/.local/state when the home is the user's
};
// What this user has of them (a stat or two).
PrivatePlaces find_private_places(uid_t uid);

// The state directory: `option` (--state-dir) if given, else $RATELIMIT_STATE_DIR, else
// $XDG_RUNTIME_DIR/ratelimit, else /run/user/UID/ratelimit, else $XDG_STATE_HOME/ratelimit (or
// ~/.local/state/ratelimit), else /tmp/ratelimit-UID, which another user can take first (a
// directory or a link there is then refused, exit 77): only for a user without a home of their
// own. Unset or empty variables are passed as "".
std::string choose_state_dir(std::string_view option, std::string_view ratelimit_state_dir,
                             std::string_view xdg_runtime_dir, const PrivatePlaces& places);
// The state directory of this user: choose_state_dir() with the environment and effective uid;
// the missing parents of a state directory under the home are made (0700).
std::string state_dir_from_environment(std::string_view option);

// This boot's id (/proc/sys/kernel/random/boot_id); empty if the kernel does not tell.
std::string read_boot_id();
// This machine's id (/etc/machine-id, else /var/lib/dbus/machine-id); empty if it has none.
std::string read_machine_id();

}  // namespace ratelimit::state
