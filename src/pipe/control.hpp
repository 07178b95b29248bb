#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/posix.hpp"

namespace ratelimit::pipe {

// A new rate for a running pipe, as `ratelimit set` sends it.
struct RateMessage {
  double units_per_second;
  bool in_bytes;  // written with B or bit: only byte mode can take it
};

// One line of text, e.g. "2000000 bytes\n" or "20 units\n".
std::string encode(const RateMessage& message);
std::optional<RateMessage> decode_rate_message(std::string_view line);

// Live control of a running pipe. Each pipe process makes a FIFO named after its process id in a
// private directory ($XDG_RUNTIME_DIR/ratelimit, or /tmp/ratelimit-UID; mode 0700, owned by the
// user) and watches it in every wait; `ratelimit set PID --rate R` writes one line into it.
class ControlChannel {
 public:
  // This process's channel; nullptr when the directory is not safe to use (no live control then).
  static std::unique_ptr<ControlChannel> create();
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  int fd() const { return fifo_.get(); }
  // The complete lines received since the last call.
  std::vector<std::string> take_lines();

 private:
  ControlChannel(std::string path, io::FileDescriptor fifo);

  std::string path_;
  io::FileDescriptor fifo_;
  std::string partial_line_;
};

// Sends `message` to the pipe running as process `pid`. Throws std::system_error; ENOENT and ENXIO
// mean that no ratelimit pipe runs as that process.
void send_rate_message(long pid, const RateMessage& message);

}  // namespace ratelimit::pipe
