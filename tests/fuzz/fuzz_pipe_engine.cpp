// The pipe engine against a fuzzed world: input arriving in pieces at fuzzed times, reads that
// find nothing yet (EAGAIN), waits cut short for nothing (EINTR, a control message without a
// rate), short writes and splices; with a bucket of its own or a shared one, whose rate another
// user may change. Every byte arrives once and in order, no write comes before the rate allows
// it, and a shared key is charged exactly for what moved.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../unit/memory_store.hpp"
#include "pipe/engine.hpp"
#include "pipe/io.hpp"
#include "pipe/permit_source.hpp"
#include "stores/bucket_store.hpp"

namespace {

using std::chrono::nanoseconds;
using namespace ratelimit;

// Takes bytes from the front of the fuzz input; zeros once it runs out, and a zero always means
// the plain case (no EAGAIN, no early wake-up, no short write), so that every run ends.
class Schedule {
 public:
  Schedule(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::size_t left() const { return size_ - at_; }
  std::string take(std::size_t count) {
    count = std::min(count, left());
    std::string bytes(reinterpret_cast<const char*>(data_ + at_), count);
    at_ += count;
    return bytes;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

class FuzzedIo final : public pipe::Io {
 public:
  struct Write {
    nanoseconds time;
    std::string data;
  };

  FuzzedIo(Schedule& schedule, bool splice_allowed, bool takes_back)
      : schedule_(schedule), splice_allowed_(splice_allowed), takes_back_(takes_back) {}

  void arrive(nanoseconds at, std::string data) {
    input_ += data;
    arrivals_.push_back({at, input_.size()});
  }
  const std::vector<Write>& writes() const { return writes_; }
  std::string output() const {
    std::string all;
    for (const Write& write : writes_) all += write.data;
    return all;
  }
  const std::string& input() const { return input_; }

  nanoseconds now() override { return now_; }

  pipe::Wake wait(nanoseconds deadline, pipe::WaitFor what) override {
    if (++calls_ > 1'000'000) std::abort();  // the engine spins
    const bool for_input = what == pipe::WaitFor::input;
    if (for_input && (readable() > 0 || at_end())) return pipe::Wake::ready;
    nanoseconds until = deadline;
    if (for_input || what == pipe::WaitFor::input_end) until = std::min(until, next_arrival());
    if (until == nanoseconds::max()) std::abort();  // would wait forever
    // A wait cut short for nothing: a signal that is no stop, a control line without a rate.
    if (schedule_.byte() % 8 == 1 && until > now_ + nanoseconds(1)) {
      now_ += (until - now_) / 2;
      return pipe::Wake::control;
    }
    // A late timer, as a loaded machine's.
    now_ = std::max(now_, until + nanoseconds(schedule_.byte() * 10'000));
    if (for_input) return readable() > 0 || at_end() ? pipe::Wake::ready : pipe::Wake::timeout;
    return pipe::Wake::timeout;
  }

  bool input_exhausted() const override { return at_end(); }
  std::optional<std::size_t> bytes_ready() override { return readable(); }
  bool input_ready_now() override { return readable() > 0 || at_end(); }

  pipe::Moved read(std::span<char> buffer) override {
    if (at_end()) return {0, true, false};
    // EAGAIN: what a descriptor another process made non-blocking says.
    if (schedule_.byte() % 5 == 1) return {0, false, false};
    const std::size_t count = std::min(buffer.size(), readable());
    std::copy_n(input_.data() + read_, count, buffer.data());
    read_ += count;
    return {count, false, false};
  }

  bool input_takes_back() const override { return takes_back_; }
  bool unread(std::size_t bytes) override {
    if (!takes_back_ || bytes > read_) return false;
    read_ -= bytes;
    return true;
  }

  std::optional<std::size_t> write(std::span<const char> data) override {
    if (data.empty()) std::abort();
    const std::size_t count = std::min(data.size(), short_write_limit());
    writes_.push_back({now_, std::string(data.data(), count)});
    return count;
  }

  std::optional<pipe::Moved> splice(std::size_t max_bytes) override {
    if (!splice_allowed_) return std::nullopt;
    if (at_end()) return pipe::Moved{0, true, false};
    const std::size_t count = std::min({max_bytes, readable(), short_write_limit()});
    if (count > 0) writes_.push_back({now_, input_.substr(read_, count)});
    read_ += count;
    return pipe::Moved{count, false, false};
  }

  std::optional<control::NewRate> take_new_rate() override { return std::nullopt; }
  int stop_signal() const override { return 0; }

 private:
  struct Arrival {
    nanoseconds time;
    std::size_t end;  // input_[0, end) has arrived by `time`
  };
  std::size_t arrived() const {
    std::size_t end = 0;
    for (const Arrival& arrival : arrivals_)
      if (arrival.time <= now_) end = std::max(end, arrival.end);
    return end;
  }
  std::size_t readable() const { return arrived() - read_; }
  std::size_t short_write_limit() {
    const std::size_t limit = schedule_.byte();
    return limit == 0 ? std::numeric_limits<std::size_t>::max() : limit * 16;
  }
  bool at_end() const { return read_ == input_.size(); }
  nanoseconds next_arrival() const {
    for (const Arrival& arrival : arrivals_)
      if (arrival.time > now_ && arrival.end > read_) return arrival.time;
    return nanoseconds::max();
  }

  Schedule& schedule_;
  bool splice_allowed_;
  bool takes_back_;
  nanoseconds now_{std::chrono::seconds(1)};
  std::string input_;
  std::vector<Arrival> arrivals_;
  std::size_t read_ = 0;
  std::vector<Write> writes_;
  std::size_t calls_ = 0;
};

std::int64_t units_in(const std::string& data, const pipe::Unit& unit, bool& inside_record) {
  if (unit.counts_bytes()) return static_cast<std::int64_t>(data.size());
  std::int64_t records = 0;
  for (const char byte : data) {
    if (!inside_record) ++records;
    inside_record = byte != *unit.delimiter;
  }
  return records;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Schedule schedule(data, size);
  pipe::EngineOptions options;
  options.bucket.permits_per_second = 1 + schedule.byte() * 40.0;
  options.chunk_units = 1 + schedule.byte() % 64;
  options.buffer_bytes = 8 + schedule.byte();
  const std::uint8_t mode = schedule.byte();
  if (mode % 3 == 1) options.unit = pipe::Unit{'\n'};
  if (mode % 3 == 2) options.unit = pipe::Unit{'\0'};
  FuzzedIo io(schedule, mode & 4, mode & 16);

  nanoseconds at = io.now();
  const std::size_t pieces = 1 + schedule.byte() % 8;
  for (std::size_t i = 0; i < pieces && schedule.left() > 0; ++i) {
    at += std::chrono::milliseconds(schedule.byte());
    io.arrive(at, schedule.take(1 + schedule.byte()));
  }

  const bool shared = mode & 8;
  const int other_user_at_call = shared ? schedule.byte() % 4 : 0;
  testing::MemoryStore store(io);
  store.other_user_at_call = other_user_at_call;
  store.other_user_rate = 1 + schedule.byte() * 40.0;
  testing::IoClockWaiter waiter(io);
  stores::PermitRequest request;
  request.key = "fuzzed";
  request.params = options.bucket;
  pipe::SharedPermitSource source(store, request, waiter);
  const pipe::Result result =
      shared ? pipe::Engine(options, io, source).run() : pipe::Engine(options, io).run();
  if (result.ending != pipe::Ending::end_of_input) std::abort();
  if (io.output() != io.input()) std::abort();
  // What stays booked is what moved: the rest was given back, unless another user changed the key
  // after the pipe's bookings (give-backs never move the key past another's change), or the run
  // ended longer than the bucket's fill time after its last turn (a slow producer's last bytes):
  // the key is full again either way, and give_back() leaves it as it is. Then more stays.
  const auto kept = store.booked - store.given_back;
  const auto moved = static_cast<std::int64_t>(result.totals.units);
  const bool full_again =
      store.bucket && store.bucket->state().next_free +
                              std::chrono::duration_cast<nanoseconds>(std::chrono::duration<double>(
                                  options.bucket.max_burst_seconds)) <=
                          io.now();
  if (shared && kept < moved) std::abort();
  if (shared && other_user_at_call == 0 && !full_again && kept != moved) std::abort();
  if (other_user_at_call != 0) return 0;  // the rate below held only until then

  // Guava's schedule: the units before a write are paid for by the time since the start, plus
  // the first chunk (free) and a second of stored permits; a record longer than the buffer
  // counts once however many writes it takes.
  const double rate = options.bucket.permits_per_second;
  const nanoseconds start = std::chrono::seconds(1);
  bool inside_record = false;
  std::int64_t units_before = 0;
  for (const FuzzedIo::Write& write : io.writes()) {
    const double seconds = std::chrono::duration<double>(write.time - start).count();
    // A shared source may also have its booking ahead (10 ms of the rate) paid first.
    const double ahead = shared ? std::max<double>(options.chunk_units, rate / 100) : 0.0;
    if (static_cast<double>(units_before) > rate * seconds + rate + options.chunk_units + ahead + 1)
      std::abort();
    units_before += units_in(write.data, options.unit, inside_record);
  }
  return 0;
}
