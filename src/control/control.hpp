#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/new_rate.hpp"
#include "format/quantities.hpp"
#include "io/posix.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::control {

// A new rate as one line of text, e.g. "2000000\n" or "timetable 08:00,1000;18:00,off\n", and
// back (without the newline); nullopt unless a positive number or a timetable.
std::string encode_rate(const NewRate& rate);
std::optional<NewRate> decode_rate(std::string_view line);

// A key of a pipe with several, and how long its turns have held the pipe so far.
struct KeyHeld {
  std::string key;
  double held_seconds = 0.0;
  friend bool operator==(const KeyHeld&, const KeyHeld&) = default;
};

// What a running pipe tells `status` and `set` about itself.
struct PipeStatus {
  // What it counts and how its --rate was written, to show its rate alike.
  format::Notation notation{.counted = format::Counted::bytes};
  double rate = 0.0;  // units per second in force; infinity: no limit (a timetable's "off")
  std::uint64_t units = 0;
  std::uint64_t bytes = 0;
  // Control messages the pipe has read and acted on, counted by its ControlChannel: `set` waits
  // for a status that counts its own, whose rate is then the one in force.
  std::uint64_t answered = 0;
  std::string key{};  // the shared bucket; empty: none
  // The timetable it follows, as format::timetable_text() writes it; empty: none.
  std::string timetable{};
  // With several keys: every key, `key` first, and the one whose turn the pipe waits for now
  // (empty: none). One key: none.
  std::vector<KeyHeld> keys{};
  std::string held_by{};
  friend bool operator==(const PipeStatus&, const PipeStatus&) = default;
};
// One line, e.g. "ratelimit-pipe 4 bits si 52428800 1000 1000 0 617069 1 - 5d1f2c3a\n" (counted
// as bytes, bits or lines or records; SI or IEC prefixes; rate, units, bytes, answered; the key in
// hex, "-" for none; the notation's period in seconds, 0 for none; the timetable, "-" for none;
// then, with several keys, each key in hex and how long it held the pipe ("6869=0.5,616c6c=2.25")
// and the key that holds it now in hex ("-" for none); the FNV-1a hash of what comes before it),
// and back; nullopt unless it is exactly such a line (a torn or foreign file is not believed). A
// record without the period and the timetable, or without the keys (a pipe of an earlier
// version, or of one key), is read as having none.
std::string encode_status(const PipeStatus& status);
std::optional<PipeStatus> decode_status(std::string_view record);

// What a call of exec or acquire with several keys tells `status` while it waits for its turn.
// What such a call waits for: its turn, a --max-inflight slot of its first key (before its turn),
// or a pause (back-off) of a key reported after its turn came.
enum class CallWait { turn, slot, pause };
// "turn", "slot", "pause", and back (nullopt for any other word).
std::string_view call_wait_name(CallWait wait);
std::optional<CallWait> call_wait_named(std::string_view name);

struct CallStatus {
  std::string command;  // "exec" or "acquire"
  CallWait waits_for = CallWait::turn;
  // Every key, in the call's order, with the wait it asked for on its own (held_seconds; 0 but for
  // the turn).
  std::vector<KeyHeld> keys{};
  // The key whose turn, slot or pause the call waits for.
  std::string held_by{};
  // When the wait ends, on the monotonic clock that every process of the host shares
  // (io::monotonic_now()); nanoseconds::max() when not known (a slot, without --timeout).
  std::chrono::nanoseconds until{0};
  friend bool operator==(const CallStatus&, const CallStatus&) = default;
};
// One line, e.g. "ratelimit-call 2 acquire turn 61=0,62=59.5 62 81234567890 5d1f2c3a\n" (the
// command; what it waits for; each key in hex and its own wait in seconds; the holder in hex; the
// end of the wait in nanoseconds; the FNV-1a hash of what comes before it, as a pipe's status
// record), and back; nullopt unless it is exactly such a line.
std::string encode_call_status(const CallStatus& status);
std::optional<CallStatus> decode_call_status(std::string_view record);

// A waiting call's status, shown as "call-PID.status" in the state directory (the pipes' one) for
// as long as this object lives. One left by a killed call is not listed (its process is gone) and
// is removed by the next call or pipe.
class WaitingCallRecord {
 public:
  // nullptr when the directory is not safe to use or the record cannot be written: it is news,
  // and the call waits all the same.
  static std::unique_ptr<WaitingCallRecord> create(const std::string& state_dir,
                                                   const CallStatus& status);
  ~WaitingCallRecord();
  WaitingCallRecord(const WaitingCallRecord&) = delete;
  WaitingCallRecord& operator=(const WaitingCallRecord&) = delete;

 private:
  WaitingCallRecord(state::StateDirectory directory, std::string name);

  state::StateDirectory directory_;
  std::string name_;
};

// The calls with a record in the state directory `path` whose process still runs and whose wait
// has not ended over a second ago (a record left under a process id used again), by process id.
struct ListedCall {
  long pid;
  CallStatus status;
};
std::vector<ListedCall> list_waiting_calls(const std::string& path);

// Live control of a running pipe. Each pipe process makes a FIFO named after its process id and
// what it counts ("pipe-PID.bytes" or "pipe-PID.records") in the state directory (the one of the
// shared buckets, --state-dir: private to the user, see state::StateDirectory) and watches it in
// every wait; `ratelimit set PID --rate R` writes one line into it. Every step goes through the
// checked directory's descriptor, never its path.
class ControlChannel {
 public:
  // This process's channel in the state directory `state_dir`; nullptr when the directory is not
  // safe to use (no live control then). Removes the FIFOs of pipes that were killed before they
  // could.
  static std::unique_ptr<ControlChannel> create(const std::string& state_dir, bool counts_bytes);
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  int fd() const { return fifo_.get(); }
  // The complete lines received since the last call, except requests for the status (which only
  // make the pipe publish). A line longer than any message is dropped whole, so what is kept of a
  // line stays small whatever is written.
  std::vector<std::string> take_lines();

  // Publishes this pipe's status beside its FIFO ("pipe-PID.status") with the count of lines taken
  // so far, once a line has come (`status` and `set` ask with one), then when the rate or that
  // count changed or about a second has passed since the last time (`now` on any steady clock).
  // A status that cannot be written is skipped: it is news, not data.
  void publish(PipeStatus status, std::chrono::nanoseconds now);

 private:
  ControlChannel(state::StateDirectory directory, std::string name, io::FileDescriptor fifo);

  state::StateDirectory directory_;
  std::string name_;
  std::string status_name_;
  io::FileDescriptor fifo_;
  std::optional<PipeStatus> published_;
  std::chrono::nanoseconds published_at_{0};
  std::string partial_line_;
  std::uint64_t lines_taken_ = 0;
  bool dropping_line_ = false;  // the line in progress is too long: skipped up to its end
  bool asked_ = false;          // a line has come: someone looks at this pipe, which then publishes
  // The status file, created by the first publish() and then rewritten in place (a reader that
  // meets a write half done sees a record whose check fails): a file created and renamed every
  // second cost a slow pipe about a third of its CPU on ext4 (scripts/bench_cpu.sh).
  io::FileDescriptor status_file_;
  std::size_t status_bytes_ = 0;
};

// The channel of the pipe running as process `pid` with the state directory `state_dir`, to send
// to.
struct RunningPipe {
  state::StateDirectory directory;
  std::string fifo_name;
  bool counts_bytes;
};
std::optional<RunningPipe> find_running_pipe(const std::string& state_dir, long pid);

// What the pipe published last; nullopt if nothing (yet) or not a status.
std::optional<PipeStatus> read_status(const RunningPipe& pipe);
// What the pipe published last, asked for and awaited within `timeout` if it has published nothing
// yet; nullopt if it did not answer. Throws std::system_error.
std::optional<PipeStatus> current_status(const RunningPipe& pipe, std::chrono::nanoseconds timeout);

// The pipes with a FIFO in the state directory `path` that a process still reads (one killed
// before it could remove its FIFO is left out), by process id, with their status (asked for from
// those that have published none; nullopt if one did not answer within half a second).
struct ListedPipe {
  long pid;
  bool counts_bytes;
  std::optional<PipeStatus> status;
};
std::vector<ListedPipe> list_running_pipes(const std::string& path);

// Sends a new rate; false when no process reads the pipe's FIFO (one killed before it could
// remove it). Throws std::system_error.
bool send_rate(const RunningPipe& pipe, const NewRate& rate);

// The pipe's answer to a message sent after it had answered `answered`: its first status that
// counts more, read within `timeout`; nullopt if none came (a pipe blocked on its output reads
// its FIFO only once it can write again).
std::optional<PipeStatus> await_answer(const RunningPipe& pipe, std::uint64_t answered,
                                       std::chrono::nanoseconds timeout);

}  // namespace ratelimit::control
