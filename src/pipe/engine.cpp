#include "pipe/engine.hpp"

#include <algorithm>

namespace ratelimit::pipe {

using std::chrono::nanoseconds;

namespace {

constexpr nanoseconds kForever = nanoseconds::max();

}  // namespace

std::int64_t default_chunk_units(double units_per_second, std::int64_t max_units) {
  const double per_write = units_per_second / kWritesPerSecond;
  if (!(per_write < static_cast<double>(max_units))) return max_units;  // also +inf
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(per_write));
}

Engine::Engine(const EngineOptions& options, Io& io, ProgressCallback on_progress)
    : options_(options),
      io_(io),
      on_progress_(std::move(on_progress)),
      own_source_(std::in_place, options.bucket, io.now()),
      source_(*own_source_) {
  start();
}

Engine::Engine(const EngineOptions& options, Io& io, PermitSource& source,
               ProgressCallback on_progress)
    : options_(options), io_(io), on_progress_(std::move(on_progress)), source_(source) {
  start();
}

void Engine::start() {
  totals_.started = totals_.now = io_.now();
  totals_.rate = options_.bucket.permits_per_second;
  if (on_progress_) next_progress_ = totals_.started + options_.progress_interval;
}

Result Engine::run() {
  if (options_.unit.counts_bytes()) {
    if (std::optional<Result> result = run_spliced()) return *result;
  }
  return run_buffered();
}

std::optional<Result> Engine::run_spliced() {
  const auto chunk_bytes = static_cast<std::size_t>(options_.chunk_units);
  // The bucket's turn comes first and the input is only waited for when a splice finds it empty:
  // one wake-up per chunk while the producer is ahead. The chunk is booked when it was both due
  // and there, as if it had been read at its arrival: a wake-up late by the timer's slack would
  // otherwise count as idle time, which a warming-up bucket pays for by cooling down. The turn is
  // not waited for once the input is known to hold nothing more, so the end comes without a wait.
  nanoseconds input_seen_at = nanoseconds::min();
  while (true) {
    // A splice now finds the end of this input without moving anything: no turn is booked for it.
    nanoseconds turn = io_.now();
    if (!io_.input_exhausted()) {
      const std::optional<nanoseconds> due = source_.turn(options_.chunk_units, turn);
      // Nothing has been read yet, so a stop here leaves nothing behind.
      if (!due) return finish(Ending::stopped, io_.stop_signal());
      turn = *due;
    }
    if (wait(turn, WaitFor::input_end) == Wake::stop)
      return finish(Ending::stopped, io_.stop_signal());
    const nanoseconds requested_at = std::min(io_.now(), std::max(turn, input_seen_at));
    const std::optional<Moved> moved = io_.splice(chunk_bytes);
    if (!moved) return std::nullopt;
    if (moved->output_closed) return finish(Ending::downstream_closed);
    if (moved->bytes > 0) {
      const auto bytes = static_cast<std::int64_t>(moved->bytes);
      charge(moved->bytes, bytes, requested_at);
    } else if (moved->end_of_input) {
      return finish(Ending::end_of_input);
    } else if (wait(kForever, WaitFor::input) == Wake::stop) {
      return finish(Ending::stopped, io_.stop_signal());
    } else {
      input_seen_at = io_.now();
    }
  }
}

Result Engine::run_buffered() {
  buffer_.resize(
      options_.unit.counts_bytes()
          ? std::max(options_.buffer_bytes, static_cast<std::size_t>(options_.chunk_units))
          : options_.buffer_bytes);
  bool end_of_input = false;
  while (true) {
    const Span span = next_span(end_of_input);
    if (span.bytes == 0) {
      if (end_of_input) return finish(Ending::end_of_input);
      if (wait(kForever, WaitFor::input) == Wake::stop) return stop_after_writing_buffer();
      std::copy(buffer_.begin() + static_cast<std::ptrdiff_t>(begin_),
                buffer_.begin() + static_cast<std::ptrdiff_t>(end_), buffer_.begin());
      end_ -= begin_;
      begin_ = 0;
      const std::size_t room = options_.unit.counts_bytes()
                                   ? static_cast<std::size_t>(options_.chunk_units)
                                   : buffer_.size() - end_;
      const Moved got = io_.read(std::span(buffer_.data() + end_, room));
      end_ += got.bytes;
      end_of_input = got.end_of_input;
      continue;
    }
    const nanoseconds requested_at = io_.now();
    if (span.units > 0) {
      const std::optional<nanoseconds> turn = source_.turn(span.units, requested_at);
      if (!turn || wait(*turn, WaitFor::deadline) == Wake::stop) return stop_after_writing_buffer();
    }
    switch (write_buffered(span.bytes, requested_at)) {
      case Written::all:
        break;
      case Written::downstream_closed:
        return finish(Ending::downstream_closed);
      case Written::stopped:
        return stop_after_writing_buffer();
    }
  }
}

Engine::Span Engine::next_span(bool end_of_input) const {
  const std::size_t pending = end_ - begin_;
  if (pending == 0) return {0, 0};
  if (options_.unit.counts_bytes()) {
    const std::size_t bytes = std::min(pending, static_cast<std::size_t>(options_.chunk_units));
    return {bytes, static_cast<std::int64_t>(bytes)};
  }
  const char delimiter = *options_.unit.delimiter;
  const char* const first = buffer_.data() + begin_;
  const char* const last = buffer_.data() + end_;
  if (inside_record_) {
    // The rest of a record already charged: out at once, so no wait falls inside it.
    const char* record_end = std::find(first, last, delimiter);
    return {static_cast<std::size_t>(std::min(record_end + 1, last) - first), 0};
  }
  const char* span_end = first;
  std::int64_t records = 0;
  while (records < options_.chunk_units) {
    const char* record_end = std::find(span_end, last, delimiter);
    if (record_end == last) break;
    span_end = record_end + 1;
    ++records;
  }
  if (records > 0) return {static_cast<std::size_t>(span_end - first), records};
  // An unfinished record goes out only when no more of it can come or fit.
  if (end_of_input || pending == buffer_.size()) return {pending, 1};
  return {0, 0};
}

Engine::Written Engine::write_buffered(std::size_t bytes, nanoseconds requested_at) {
  while (bytes > 0) {
    const std::optional<std::size_t> written =
        io_.write(std::span<const char>(buffer_.data() + begin_, bytes));
    if (!written) return Written::downstream_closed;
    if (*written == 0) return Written::stopped;
    const char* const first = buffer_.data() + begin_;
    const char* const last = first + *written;
    std::int64_t units = static_cast<std::int64_t>(*written);
    if (!options_.unit.counts_bytes() && *written > 0) {
      // Records started here = records ended here + one left open - one continued.
      const bool was_inside = inside_record_;
      inside_record_ = last[-1] != *options_.unit.delimiter;
      units = std::count(first, last, *options_.unit.delimiter) + (inside_record_ ? 1 : 0) -
              (was_inside ? 1 : 0);
    }
    charge(*written, units, requested_at);
    begin_ += *written;
    bytes -= *written;
    // A stop signal that cut a write short after some bytes: the rest is the stop's business.
    if (bytes > 0 && !stopping_ && io_.stop_signal() != 0) return Written::stopped;
  }
  return Written::all;
}

void Engine::charge(std::size_t bytes, std::int64_t units, nanoseconds requested_at) {
  source_.consume(units, requested_at);
  totals_.bytes += bytes;
  totals_.units += static_cast<std::uint64_t>(units);
}

Wake Engine::wait(nanoseconds deadline, WaitFor what) {
  while (true) {
    const nanoseconds now = io_.now();
    if (now >= next_progress_) report_progress(now);
    if (what == WaitFor::input_end && io_.input_exhausted()) return Wake::ready;
    if (what != WaitFor::input && now >= deadline) return Wake::timeout;
    const Wake wake = io_.wait(std::min(deadline, next_progress_), what);
    if (wake == Wake::control) {
      if (const std::optional<double> rate = io_.take_new_rate()) {
        source_.set_rate(*rate, io_.now());
        totals_.rate = *rate;
      }
      continue;
    }
    // A ready for input_end is news to check at the top: the input may still hold bytes.
    if (wake == Wake::stop || (wake == Wake::ready && what == WaitFor::input)) return wake;
  }
}

void Engine::report_progress(nanoseconds now) {
  totals_.now = now;
  on_progress_(totals_);
  while (next_progress_ <= now) next_progress_ += options_.progress_interval;
}

Result Engine::stop_after_writing_buffer() {
  const int signal = io_.stop_signal();
  stopping_ = true;
  // What was read still goes out, unless another stop signal cuts the wait for the output short.
  const Written written = write_buffered(end_ - begin_, io_.now());
  return finish(written == Written::downstream_closed ? Ending::downstream_closed : Ending::stopped,
                signal);
}

Result Engine::finish(Ending ending, int signal) {
  totals_.now = io_.now();
  if (on_progress_) on_progress_(totals_);
  return Result{ending, signal, totals_};
}

}  // namespace ratelimit::pipe
