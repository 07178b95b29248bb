#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/posix.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::pipe {

// A new rate as one line of text, e.g. "2000000\n", and back; nullopt unless a positive number.
std::string encode_rate(double units_per_second);
std::optional<double> decode_rate(std::string_view line);

// Live control of a running pipe. Each pipe process makes a FIFO named after its process id and
// what it counts ("pipe-PID.bytes" or "pipe-PID.records") in the user's state directory (the one of
// the shared buckets: private to the user, see backends::StateDirectory) and watches it in every
// wait; `ratelimit set PID --rate R` writes one line into it. Every step goes through the checked
// directory's descriptor, never its path.
class ControlChannel {
 public:
  // This process's channel; nullptr when the directory is not safe to use (no live control then).
  // Removes the FIFOs of pipes that were killed before they could.
  static std::unique_ptr<ControlChannel> create(bool counts_bytes);
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  int fd() const { return fifo_.get(); }
  // The complete lines received since the last call. A line longer than any message is dropped
  // whole, so what is kept of a line stays small whatever is written.
  std::vector<std::string> take_lines();

 private:
  ControlChannel(backends::StateDirectory directory, std::string name, io::FileDescriptor fifo);

  backends::StateDirectory directory_;
  std::string name_;
  io::FileDescriptor fifo_;
  std::string partial_line_;
  bool dropping_line_ = false;  // the line in progress is too long: skipped up to its end
};

// The channel of the pipe running as process `pid`, to send to.
struct RunningPipe {
  backends::StateDirectory directory;
  std::string fifo_name;
  bool counts_bytes;
};
std::optional<RunningPipe> find_running_pipe(long pid);

// Sends a new rate. Throws std::system_error; ENXIO means that the pipe has gone.
void send_rate(const RunningPipe& pipe, double units_per_second);

}  // namespace ratelimit::pipe
