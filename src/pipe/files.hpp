#pragma once

#include <sys/stat.h>

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control/control.hpp"
#include "io/posix.hpp"
#include "io/waiter.hpp"
#include "pipe/io.hpp"

namespace ratelimit::pipe {

// The engine's Io on file descriptors: the inputs in order ("-" is standard input), the output
// ("-" is standard output), waits through its own SignalGuard, and an optional control channel.
class FileIo final : public Io {
 public:
  // Opens every input now, so that a missing or unreadable one (a directory too) stops the run
  // before anything is written: throws InputError naming it. Stop signals are caught only
  // once every file is open (opening a FIFO may wait for its writer, and Ctrl-C must still work
  // there). SIGPIPE is ignored while alive, so a closed downstream is seen as EPIPE.
  FileIo(const std::vector<std::string>& inputs, const std::string& output,
         control::ControlChannel* control);
  ~FileIo() override;
  FileIo(const FileIo&) = delete;
  FileIo& operator=(const FileIo&) = delete;

  // The sum of the inputs' sizes when every input is a regular file.
  std::optional<std::uint64_t> total_bytes() const { return total_bytes_; }
  // The records ended by `delimiter` that the inputs hold (a last one without its delimiter
  // counts), read ahead without moving their offsets; none unless every input is a regular file
  // of at most `most_bytes` in all, or if one cannot be read.
  std::optional<std::uint64_t> count_records(char delimiter, std::uint64_t most_bytes) const;
  // Grows the pipes at either end toward `wanted_bytes`, as far as the system allows (fewer
  // system calls at high rates), and returns what one write can move without blocking: the
  // output pipe's capacity, or 64 KiB when the output is no pipe.
  std::size_t fit_pipes_to(std::size_t wanted_bytes);

  // Waits on this Io's signals and clock, for a store of shared buckets.
  io::Waiter& waiter() { return *waiter_; }

  std::chrono::nanoseconds now() override;
  Wake wait(std::chrono::nanoseconds deadline, WaitFor what) override;
  bool input_exhausted() const override;
  std::optional<std::size_t> bytes_ready() override;
  bool input_end_known() const override;
  bool input_ready_now() override;
  Moved read(std::span<char> buffer) override;
  bool input_takes_back() const override;
  bool unread(std::size_t bytes) override;
  std::optional<std::size_t> write(std::span<const char> data) override;
  std::optional<Moved> splice(std::size_t max_bytes) override;
  std::optional<control::NewRate> take_new_rate() override;
  int stop_signal() const override;

 private:
  struct Input {
    std::string name;
    io::FileDescriptor fd;
    bool is_pipe;
    // A pipe, a socket or a terminal: FIONREAD says what it holds now. Once poll says it is ready,
    // nothing held is its end (a writer gone, a peer's shutdown, an end-of-file key), seen without
    // reading it.
    bool says_held;
    // What the input will still give, when known: the rest of a regular file, and what a pipe
    // holds once its last writer has closed.
    std::optional<std::size_t> bytes_left;
    // A file or a block device: read at explicit offsets (pread). Standard input's offset, which
    // the caller shares, follows what was written, moved before each wait (one system call per
    // chunk, not per write): whatever ends the run, even SIGKILL, the next reader starts after
    // the last chunk out, not after what was read ahead; what was read and not written is given
    // back by not moving it. A file this process opened shares its offset with no one.
    bool takes_back;
    bool shares_offset;
    off_t read_offset = 0;      // where the next pread starts
    std::size_t unwritten = 0;  // read and neither written nor given back yet
    std::size_t unsynced = 0;   // written, and the offset not yet moved past it
  };
  // How a write reaches the output without blocking while the stop signals are held back.
  enum class OutputWrite {
    // write(2) returns at once: a non-blocking description of our own (a pipe, a terminal), or
    // an output no reader holds up (a regular file, a block device, /dev/null); a full output
    // says EAGAIN and the signal-aware poll waits for room.
    at_once,
    socket,          // send(2) with MSG_DONTWAIT, then the same poll
    signals_let_in,  // anything else: write(2) with the stop signals let in around it
  };

  // A file as the system knows it, whatever name it was opened by.
  using FileIdentity = std::pair<dev_t, ino_t>;

  // The steps of the constructor. Opens the inputs in order ("-" or none: standard input) and
  // notes their total size when every one is a regular file; returns the regular files' identities.
  std::vector<FileIdentity> open_inputs(const std::vector<std::string>& names);
  // Opens one input and adds it to inputs_; returns its status. Throws InputError naming it.
  struct stat open_input(const std::string& name);
  // Opens the output ("-": standard output), creating it but not emptying it yet; returns its
  // status.
  struct stat open_output(const std::string& name);
  // Sets output_write_ for the output of `status`.
  void choose_output_write(const struct stat& status);
  // A description of our own, non-blocking, for the same pipe or terminal: a write then never
  // blocks, and the wait for room is the signal-aware poll, so that no stop signal can slip in
  // between a check and a blocking write. The caller's description keeps its flags. False, and
  // output_ left as it is, where /proc does not reopen the same file.
  bool reopen_output_non_blocking(const struct stat& status);
  // A regular output is emptied only once it is known not to be an input (InputError), as cat
  // refuses to eat its own input; standard output is left as the shell opened it.
  void empty_regular_output(const struct stat& status,
                            const std::vector<FileIdentity>& regular_inputs, bool standard);

  bool at_end() const { return current_ == inputs_.size(); }
  static void note_writers_gone(Input& input);
  static void note_moved(Input& input, std::size_t bytes);
  // Moves on from the input that ended (closed once what was read of it is written); true when
  // none is left.
  bool next_input();
  // `bytes` were written: the offsets of the inputs they came from are to move past them.
  void note_written(std::size_t bytes);
  // Moves those offsets, and closes the inputs that ended and are written whole.
  void sync_offsets();
  // Waits until the output accepts data (true) or a stop signal newer than `seen` (a count of
  // them) arrives (false).
  bool wait_for_output(int seen);
  // One write(2) or send(2) as output_write_ says; -1 with errno as they set it.
  ssize_t write_once(std::span<const char> data, int seen);

  std::vector<Input> inputs_;
  std::size_t current_ = 0;
  std::size_t first_pending_ = 0;  // the first input that may have bytes unwritten or unsynced
  std::string output_name_;
  io::FileDescriptor output_;
  bool output_is_pipe_;
  OutputWrite output_write_ = OutputWrite::signals_let_in;
  std::optional<io::SignalGuard> signals_;
  std::optional<io::SignalWaiter> waiter_;
  control::ControlChannel* control_;
  std::optional<std::uint64_t> total_bytes_;
  struct sigaction previous_sigpipe_ {};
};

}  // namespace ratelimit::pipe
