#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "pipe/io.hpp"

namespace ratelimit::testing {

using namespace std::chrono_literals;

// The pipe engine's outside world in memory, on a clock that moves only when the engine waits:
// input arrives on a schedule, every write is recorded with its time, and a stop signal or a new
// rate can be scheduled.
class FakePipeIo final : public pipe::Io {
 public:
  struct Write {
    std::chrono::nanoseconds time;  // since start()
    std::string data;
    friend bool operator==(const Write&, const Write&) = default;
  };

  std::chrono::nanoseconds start() const { return kStart; }
  // `data` becomes readable `after` start; the input ends after the last piece.
  void arrive(std::chrono::nanoseconds after, std::string data) {
    arrivals_.push_back({kStart + after, std::move(data)});
  }
  void stop_at(std::chrono::nanoseconds after, int signal) {
    stop_time_ = kStart + after;
    stop_signal_ = signal;
  }
  void new_rate_at(std::chrono::nanoseconds after, control::NewRate rate) {
    rate_changes_.push_back({kStart + after, rate});
  }
  void allow_splice() { splice_allowed_ = true; }
  // The input takes back what was read, as a file does (unread()).
  void allow_unread() { unread_allowed_ = true; }
  // A wait that ends at its deadline ends this much later, as a real timer's slack does.
  void oversleep_by(std::chrono::nanoseconds slack) { slack_ = slack; }
  void limit_writes_to(std::size_t bytes) { max_write_ = bytes; }
  // Once `bytes` are written the output is full: the next `times` writes are cut short by the
  // stop signal `signal` (after what still fitted), as a reader that stopped reading and a `kill`
  // would do.
  void stop_blocked_writes_after(std::size_t bytes, int signal, int times) {
    blocked_after_ = bytes;
    stop_signal_ = signal;
    blocked_writes_ = times;
  }
  void close_output_after(std::size_t bytes) { close_after_ = bytes; }

  const std::vector<Write>& writes() const { return writes_; }
  std::string output() const {
    std::string all;
    for (const Write& write : writes_) all += write.data;
    return all;
  }
  // What the input still holds for its next reader.
  std::string rest() const {
    std::string all;
    for (std::size_t i = next_arrival_; i < arrivals_.size(); ++i) all += arrivals_[i].data;
    return all;
  }
  // Time passing outside the engine's waits (a slow call to a store).
  void pass(std::chrono::nanoseconds duration) { now_ += duration; }
  std::chrono::nanoseconds elapsed() const { return now_ - kStart; }
  std::size_t splices() const { return splices_; }
  std::size_t reads() const { return reads_; }
  // What was read and not put back.
  std::size_t bytes_read() const { return read_.size(); }

  std::chrono::nanoseconds now() override { return now_; }

  // The last arrival is the writer closing: a wait for input_end ends there, as the real one
  // ends at POLLHUP.
  pipe::Wake wait(std::chrono::nanoseconds deadline, pipe::WaitFor what) override {
    const bool for_input = what == pipe::WaitFor::input;
    if (for_input && (readable() || at_end())) return pipe::Wake::ready;
    std::chrono::nanoseconds until = deadline;
    if (for_input) until = std::min(until, arrivals_[next_arrival_].time);
    const bool writer_closes =
        what == pipe::WaitFor::input_end && !at_end() && arrivals_.back().time > now_;
    if (writer_closes) until = std::min(until, arrivals_.back().time);
    if (stop_time_ && *stop_time_ <= until) {
      now_ = std::max(now_, *stop_time_);
      stopped_ = true;
      return pipe::Wake::stop;
    }
    if (!rate_changes_.empty() && rate_changes_.front().time <= until) {
      now_ = std::max(now_, rate_changes_.front().time);
      return pipe::Wake::control;
    }
    EXPECT_NE(until, std::chrono::nanoseconds::max()) << "the engine would wait forever";
    if ((for_input && readable_at(until)) || (writer_closes && until == arrivals_.back().time)) {
      now_ = std::max(now_, until);
      return pipe::Wake::ready;
    }
    now_ = std::max(now_, until + slack_);
    return for_input && readable() ? pipe::Wake::ready : pipe::Wake::timeout;
  }

  // The writer closed (the last piece arrived) and nothing is left, or all was read.
  bool input_exhausted() const override {
    return at_end() || (arrivals_.back().time <= now_ && rest().empty());
  }

  // What has arrived and not been read; a file's whole rest.
  std::optional<std::size_t> bytes_ready() override {
    if (unread_allowed_) return rest().size();
    std::size_t ready = 0;
    for (std::size_t i = next_arrival_; i < arrivals_.size() && arrivals_[i].time <= now_; ++i)
      ready += arrivals_[i].data.size();
    return ready;
  }

  // A file's rest, or all that came once the writer closed.
  bool input_end_known() const override {
    return unread_allowed_ || at_end() || arrivals_.back().time <= now_;
  }

  bool input_ready_now() override { return readable() || at_end(); }

  pipe::Moved read(std::span<char> buffer) override {
    ++reads_;
    const std::string taken = take(buffer.size());
    std::copy(taken.begin(), taken.end(), buffer.begin());
    read_ += taken;
    return pipe::Moved{taken.size(), taken.empty() && at_end(), false};
  }

  bool input_takes_back() const override { return unread_allowed_; }

  bool unread(std::size_t bytes) override {
    if (!unread_allowed_ || bytes > read_.size()) return false;
    arrivals_.insert(arrivals_.begin() + static_cast<std::ptrdiff_t>(next_arrival_),
                     Arrival{now_, read_.substr(read_.size() - bytes)});
    read_.resize(read_.size() - bytes);
    return true;
  }

  std::optional<std::size_t> write(std::span<const char> data) override {
    std::size_t size = std::min(data.size(), max_write_);
    if (blocked_writes_ > 0 && written_ + size > blocked_after_) {
      // The bytes that fitted go out, then the signal ends the wait for room.
      --blocked_writes_;
      stopped_ = true;
      size = blocked_after_ - std::min(written_, blocked_after_);
      if (size == 0) return 0;
    }
    if (close_after_) {
      if (written_ >= *close_after_) return std::nullopt;
      size = std::min(size, *close_after_ - written_);
    }
    writes_.push_back({now_ - kStart, std::string(data.data(), size)});
    written_ += size;
    return size;
  }

  std::optional<pipe::Moved> splice(std::size_t max_bytes) override {
    if (!splice_allowed_) return std::nullopt;
    ++splices_;
    const std::string taken = take(max_bytes);
    if (!taken.empty()) writes_.push_back({now_ - kStart, taken});
    return pipe::Moved{taken.size(), taken.empty() && at_end(), false};
  }

  std::optional<control::NewRate> take_new_rate() override {
    if (rate_changes_.empty() || rate_changes_.front().time > now_) return std::nullopt;
    control::NewRate rate = rate_changes_.front().rate;
    rate_changes_.erase(rate_changes_.begin());
    return rate;
  }

  int stop_signal() const override { return stopped_ ? stop_signal_ : 0; }

 private:
  static constexpr std::chrono::nanoseconds kStart = 1s;  // not zero: no origin assumed

  struct Arrival {
    std::chrono::nanoseconds time;
    std::string data;
  };
  struct RateChange {
    std::chrono::nanoseconds time;
    control::NewRate rate;
  };

  bool readable_at(std::chrono::nanoseconds time) const {
    return next_arrival_ < arrivals_.size() && arrivals_[next_arrival_].time <= time;
  }
  bool readable() const { return readable_at(now_); }
  bool at_end() const { return next_arrival_ == arrivals_.size(); }
  std::string take(std::size_t max_bytes) {
    if (!readable()) return {};
    Arrival& arrival = arrivals_[next_arrival_];
    const std::string taken = arrival.data.substr(0, max_bytes);
    arrival.data.erase(0, taken.size());
    if (arrival.data.empty()) ++next_arrival_;
    return taken;
  }

  std::chrono::nanoseconds now_ = kStart;
  std::vector<Arrival> arrivals_;
  std::size_t next_arrival_ = 0;
  std::optional<std::chrono::nanoseconds> stop_time_;
  int stop_signal_ = 0;
  std::vector<RateChange> rate_changes_;
  bool splice_allowed_ = false;
  bool unread_allowed_ = false;
  std::string read_;  // by read()
  std::size_t reads_ = 0;
  std::chrono::nanoseconds slack_{0};
  std::size_t max_write_ = std::string::npos;
  std::optional<std::size_t> close_after_;
  std::size_t written_ = 0;
  std::size_t blocked_after_ = 0;
  int blocked_writes_ = 0;
  bool stopped_ = false;
  std::size_t splices_ = 0;
  std::vector<Write> writes_;
};

}  // namespace ratelimit::testing
