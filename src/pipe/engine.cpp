#include "pipe/engine.hpp"

#include <algorithm>
#include <limits>

namespace ratelimit::pipe {

using std::chrono::nanoseconds;

namespace {

constexpr nanoseconds kForever = nanoseconds::max();

}  // namespace

Engine::Engine(const EngineOptions& options, Io& io, ProgressCallback on_progress)
    : options_(options),
      io_(io),
      on_progress_(std::move(on_progress)),
      own_source_(std::in_place, options.bucket, options.quotas, io.now()),
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
  for (std::size_t i = 0; i < options_.key_schedules.size(); ++i) {
    const RatePeriod& period =
        key_scheduled_.emplace_back(options_.key_schedules[i]->at(totals_.started));
    source_.apply_key_timetable_entry(i, period.units_per_second, period.entry_until,
                                      totals_.started);
  }
  size_chunk();
  source_.refuse_turns(options_.longest_wait, options_.stop_at_quota);
  if (on_progress_) next_progress_ = totals_.started + options_.progress_interval;
  if (options_.schedule) {
    scheduled_ = options_.schedule->at(totals_.started);
    source_.apply_timetable_entry(scheduled_.units_per_second, scheduled_.entry_until,
                                  totals_.started);
    note_rate(scheduled_.units_per_second, totals_.started);
    rate_changes_.clear();  // the starting rate is no change
  }
}

Result Engine::run() {
  if (options_.unit.counts_bytes()) {
    if (std::optional<Result> result = run_spliced()) return *result;
  }
  return run_buffered();
}

std::optional<Result> Engine::run_spliced() {
  // The bucket's turn comes first and the input is only waited for when a splice finds it empty:
  // one wake-up per chunk while the producer is ahead. The chunk is asked for when it was both due
  // (the last turn) and there, as if it had been read at its arrival: a wake-up late
  // by the timer's slack would otherwise count as idle time, which a warming-up bucket pays for by
  // cooling down. A chunk begun goes out whole before the next turn is asked for: what a short
  // splice leaves (the producer a little behind) follows as the input delivers it, booked with the
  // chunk. Asking at once instead would book the next chunk early by the part not yet there, and
  // that part and the next chunk would then come close together: one 100 ms window could hold a
  // third chunk. The turn is not waited for once the input is known to hold nothing more, so the
  // end comes without a wait. A chunk written in parts (writes_per_chunk) sends each part at its
  // share of the chunk's time after the turn, as the chunk's booking runs on.
  nanoseconds input_seen_at = nanoseconds::min();
  nanoseconds last_turn = io_.now();
  nanoseconds requested_at = last_turn;
  std::int64_t chunk_units = options_.chunk_units;  // of the chunk begun
  std::int64_t chunk_rest = 0;
  std::int64_t part_units = chunk_units;
  bool input_awaited = false;  // for a booking under quotas
  while (true) {
    if (chunk_rest == 0) {
      take_rate_news();
      // Asked for and booked as of that moment: a bucket that pays first counts its wait from it.
      requested_at = std::min(io_.now(), std::max(last_turn, input_seen_at));
      // A splice now finds the end of this input without moving anything: no turn is booked.
      nanoseconds turn = requested_at;
      const std::optional<std::int64_t> ready = units_ready(0);
      const bool exhausted = io_.input_exhausted();
      // Once only: an input that says it is ready and still holds nothing is not waited for
      // again, and books a whole chunk.
      if (!exhausted && ready == 0 && !input_awaited) {
        if (wait_for_input() == Wake::stop) return finish(Ending::stopped, io_.stop_signal());
        input_seen_at = io_.now();
        input_awaited = true;
        continue;
      }
      input_awaited = false;
      if (!exhausted) {
        // No more than the input still holds, where it says (units_ready()).
        chunk_units = ready > 0 ? std::min(options_.chunk_units, *ready) : options_.chunk_units;
        const std::optional<nanoseconds> due = source_.due_time(chunk_units, requested_at, ready);
        // Nothing has been read yet, so a stop here leaves nothing behind.
        if (!due) return finish(Ending::stopped, io_.stop_signal());
        turn = last_turn = *due;
        // Nothing has been read yet: the input keeps all that was not written.
        if (const std::optional<Ending> ending = refusal(turn)) return finish(*ending);
      }
      const Wake wake = wait_for_turn(turn, WaitFor::input_end);
      if (wake == Wake::stop) return finish(Ending::stopped, io_.stop_signal());
      if (wake == Wake::control) continue;
      if (!exhausted) {
        const TurnCheck check = source_.check_turn();
        if (check == TurnCheck::stopped) return finish(Ending::stopped, io_.stop_signal());
        if (check == TurnCheck::paused) continue;
      }
      part_units = options_.writes_per_chunk > 1
                       ? chunk_part_units(totals_.rate, chunk_units,
                                          options_.write_interval() / options_.writes_per_chunk)
                       : chunk_units;
    }
    const std::int64_t unsent = chunk_rest > 0 ? chunk_rest : chunk_units;
    const std::int64_t sent = chunk_units - unsent;
    if (sent > 0 && sent % part_units == 0) {
      // A new part of the chunk: at its share of the chunk's time. A new rate or the input's end
      // sends it at once.
      if (wait(last_turn + time_of(sent), WaitFor::input_end) == Wake::stop)
        return finish(Ending::stopped, io_.stop_signal());
    }
    const std::int64_t wanted = std::min(unsent, part_units - sent % part_units);
    const std::optional<Moved> moved = io_.splice(static_cast<std::size_t>(wanted));
    if (!moved) return std::nullopt;
    if (moved->output_closed) return finish(Ending::downstream_closed);
    if (moved->bytes > 0) {
      const auto bytes = static_cast<std::int64_t>(moved->bytes);
      charge(moved->bytes, bytes, requested_at);
      chunk_rest = std::max<std::int64_t>(unsent - bytes, 0);
    } else if (moved->end_of_input) {
      return finish(Ending::end_of_input);
    } else if (wait_for_input() == Wake::stop) {
      return finish(Ending::stopped, io_.stop_signal());
    } else {
      input_seen_at = io_.now();
    }
  }
}

Result Engine::run_buffered() {
  try {
    return move_buffered();
  } catch (...) {
    // Permits cannot be asked for any more (or the data cannot move): what was read goes out or
    // back to the input all the same, then the failure ends the run.
    failed_ = stopping_ = true;
    write_due_give_back_rest();
    throw;
  }
}

Result Engine::move_buffered() {
  // Byte mode grows the buffer toward the chunk only as reads fill it: a --chunk of 900M costs
  // no more than the input holds, and what memory refuses is a smaller write, not an abort.
  // An input that takes back what was read (a regular file) is read ahead in large reads, one
  // per many writes: a stop puts back what was not to be written yet.
  buffer_.resize(
      options_.unit.counts_bytes() && !io_.input_takes_back()
          ? std::min(options_.buffer_bytes, static_cast<std::size_t>(options_.chunk_units))
          : options_.buffer_bytes);
  bool end_of_input = false;
  while (true) {
    take_rate_news();
    Span span = next_span(end_of_input);
    // Record modes read little at a time: a chunk that is short after a read that took all it
    // asked for is completed first if the input has more now, as one large read would have.
    const bool short_chunk = !options_.unit.counts_bytes() && span.bytes > 0 &&
                             span.units < options_.chunk_units && last_read_filled_ &&
                             !end_of_input && !inside_record_ && end_ < buffer_.size();
    if (span.bytes == 0 || short_chunk) {
      if (end_of_input) return finish(Ending::end_of_input);
      const Wake wake = span.bytes == 0 ? wait_for_input() : io_.wait(io_.now(), WaitFor::input);
      if (wake == Wake::stop) return stop_after_writing_buffer();
      if (wake == Wake::ready) {
        if (!books_before_reading()) {
          end_of_input = read_more(span);
          continue;
        }
        if (std::optional<Result> ended = await_grant()) return *ended;
        end_of_input = read_granted();
        continue;
      }
      span = next_span(end_of_input);  // nothing more now: the short chunk goes
    }
    const nanoseconds requested_at = io_.now();
    if (span.units > 0) {
      const std::optional<nanoseconds> turn =
          source_.due_time(span.units, requested_at, units_ready(end_ - begin_));
      if (!turn) return stop_after_writing_buffer();
      if (const std::optional<Ending> ending = refusal(*turn)) return end_refused(*ending);
      const Wake wake = wait_for_turn(*turn, WaitFor::deadline);
      if (wake == Wake::stop) return stop_after_writing_buffer();
      // The chunk and the turn follow the new rate: the span and its turn are asked for again.
      if (wake == Wake::control) continue;
      const TurnCheck check = source_.check_turn();
      if (check == TurnCheck::stopped) return stop_after_writing_buffer();
      if (check == TurnCheck::paused) continue;
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

void Engine::compact_buffer() {
  if (begin_ == 0) return;
  std::copy(buffer_.begin() + static_cast<std::ptrdiff_t>(begin_),
            buffer_.begin() + static_cast<std::ptrdiff_t>(end_), buffer_.begin());
  end_ -= begin_;
  begin_ = 0;
}

bool Engine::books_before_reading() const {
  return (options_.stop_at_quota || options_.longest_wait) && !io_.input_takes_back();
}

std::optional<Result> Engine::await_grant() {
  // A record begun without a grant is the rest of one written in part; an input at its end (ready,
  // holding nothing) has nothing to book.
  if (units_granted_ > 0 || inside_record_ || io_.bytes_ready() == std::size_t{0})
    return std::nullopt;
  // Records: a chunk, or one record where the chunk is refused. Bytes: a chunk, as a spliced
  // input is asked (one byte at a time would ask the store for each).
  while (true) {
    const std::int64_t chunk = options_.chunk_units;
    const std::int64_t fallback = options_.unit.counts_bytes() ? chunk : 1;
    std::optional<nanoseconds> granted_turn;
    for (const std::int64_t units : {chunk, fallback}) {
      const std::optional<nanoseconds> turn = source_.due_time(units, io_.now(), std::nullopt);
      if (!turn) return finish(Ending::stopped, io_.stop_signal());
      if (const std::optional<Ending> ending = refusal(*turn)) {
        if (units == fallback) return finish(*ending);
        continue;
      }
      refused_wait_ = nanoseconds::zero();
      units_granted_ = units;
      granted_turn = turn;
      break;
    }
    // Waited for before the read: a turn that a pause voids has read nothing.
    const Wake wake = wait_for_turn(*granted_turn, WaitFor::deadline);
    if (wake == Wake::stop) return stop_after_writing_buffer();
    if (wake != Wake::control) {
      const TurnCheck check = source_.check_turn();
      if (check == TurnCheck::stopped) return stop_after_writing_buffer();
      if (check == TurnCheck::holds) return std::nullopt;
    }
    // At a new rate, or after a pause that voided the turn, the turn is asked for again.
    units_granted_ = 0;
    take_rate_news();
  }
}

bool Engine::read_granted() {
  compact_buffer();
  last_read_filled_ = false;
  while (end_ < buffer_.size()) {
    // Each record ends in a delimiter: so many bytes end at most so many records.
    const auto room = std::min(buffer_.size() - end_,
                               static_cast<std::size_t>(std::max<std::int64_t>(units_granted_, 1)));
    const Moved got = io_.read(std::span(buffer_.data() + end_, room));
    const std::int64_t taken =
        options_.unit.counts_bytes()
            ? static_cast<std::int64_t>(got.bytes)
            : std::count(buffer_.data() + end_, buffer_.data() + end_ + got.bytes,
                         *options_.unit.delimiter);
    end_ += got.bytes;
    if (got.end_of_input) return true;
    if (units_granted_ > 0) {
      units_granted_ -= taken;
    } else if (taken > 0) {
      break;  // the record begun without a grant has ended
    }
    if (got.bytes == 0 || units_granted_ == 0 || !io_.input_ready_now()) break;
  }
  return false;
}

bool Engine::read_more(const Span& complete) {
  compact_buffer();
  std::size_t room = buffer_.size() - end_;
  if (!io_.input_takes_back())
    room = options_.unit.counts_bytes()
               ? std::min(room, static_cast<std::size_t>(options_.chunk_units))
               : read_ahead_bytes(complete);
  const Moved got = io_.read(std::span(buffer_.data() + end_, room));
  last_read_filled_ = got.bytes == room;
  if (options_.unit.counts_bytes() && last_read_filled_) grow_buffer();
  if (!options_.unit.counts_bytes()) note_record_lengths(complete.bytes, end_, got.bytes);
  end_ += got.bytes;
  return got.end_of_input;
}

void Engine::complete_last_record() {
  if (options_.unit.counts_bytes()) return;
  const char delimiter = *options_.unit.delimiter;
  // Byte by byte, so that nothing past the record's end is taken from the input: a record cut
  // by a read is finished from what the input holds now, never waited for.
  while (end_ > begin_ && buffer_[end_ - 1] != delimiter && end_ < buffer_.size() &&
         io_.input_ready_now()) {
    const Moved got = io_.read(std::span(buffer_.data() + end_, 1));
    if (got.bytes == 0) return;
    end_ += got.bytes;
  }
}

void Engine::grow_buffer() {
  const auto chunk = static_cast<std::size_t>(options_.chunk_units);
  if (buffer_.size() >= chunk) return;
  try {
    buffer_.resize(std::min(chunk, 2 * buffer_.size()));
  } catch (const std::bad_alloc&) {
    buffer_.shrink_to_fit();  // writes stay this size
  }
}

std::size_t Engine::read_ahead_bytes(const Span& complete) const {
  const std::size_t room = buffer_.size() - end_;
  // The rest of a record longer than the buffer: its end is not known, only that it comes.
  if (inside_record_) return room;
  // Records are at least the shortest seen so far: the records the chunk still lacks need at
  // least this much, so a read of it seldom takes records past the chunk, which a stop signal
  // would still have to write. A record in progress longer than that doubles the read, keeping
  // long records to a few reads.
  const std::size_t partial = end_ - begin_ - complete.bytes;
  const auto later_records = static_cast<std::size_t>(
      std::max<std::int64_t>(options_.chunk_units - complete.units, 1) - 1);
  const std::size_t shortest = shortest_record_.value_or(1);
  const std::size_t for_partial =
      std::max({std::size_t{1}, partial, shortest - std::min(shortest, partial)});
  if (later_records > (room - std::min(room, for_partial)) / shortest) return room;
  return std::min(room, for_partial + later_records * shortest);
}

void Engine::note_record_lengths(std::size_t partial_start, std::size_t from, std::size_t bytes) {
  const char delimiter = *options_.unit.delimiter;
  const char* const partial = buffer_.data() + partial_start;
  const char* record_start = partial;
  const char* const first_new = buffer_.data() + from;
  const char* const last = first_new + bytes;
  std::optional<std::size_t> shortest;
  for (const char* at = std::find(first_new, last, delimiter); at != last;
       at = std::find(at + 1, last, delimiter)) {
    // The first record may have begun before the buffer (written in part): its length is unknown.
    if (!(inside_record_ && record_start == partial)) {
      const auto length = static_cast<std::size_t>(at + 1 - record_start);
      shortest = std::min(shortest.value_or(length), length);
    }
    record_start = at + 1;
  }
  // The shortest of the latest records, so that one short record early on does not make every
  // later read small.
  if (shortest) shortest_record_ = shortest;
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
  due_ = bytes;
  while (due_ > 0) {
    const std::optional<std::size_t> written =
        io_.write(std::span<const char>(buffer_.data() + begin_, due_));
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
    // Out before it is charged: a charge that fails does not write it again.
    begin_ += *written;
    due_ -= *written;
    charge(*written, units, requested_at);
    // A stop signal that cut a write short after some bytes: the rest is the stop's business.
    if (due_ > 0 && !stopping_ && io_.stop_signal() != 0) return Written::stopped;
  }
  return Written::all;
}

void Engine::charge(std::size_t bytes, std::int64_t units, nanoseconds requested_at) {
  if (!failed_) source_.consume(units, requested_at, io_.now());
  totals_.bytes += bytes;
  totals_.units += static_cast<std::uint64_t>(units);
}

std::optional<std::int64_t> Engine::units_ready(std::size_t buffered) {
  // Without quotas the input is not asked unless its end is known already: a pipe's writers are
  // watched while waiting for a turn anyway, and a live pipe costs no system call per chunk.
  if (!options_.unit.counts_bytes() || (options_.quotas.empty() && !io_.input_end_known()))
    return std::nullopt;
  const std::optional<std::size_t> unread = io_.bytes_ready();
  if (!unread) return std::nullopt;
  return static_cast<std::int64_t>(std::min<std::size_t>(
      *unread + buffered, static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())));
}

Wake Engine::wait(nanoseconds deadline, WaitFor what) {
  rate_changed_ = false;
  while (true) {
    const nanoseconds now = io_.now();
    follow_schedule(now);
    if (const std::optional<double> rate = source_.rate_set_elsewhere()) note_rate(*rate, now);
    if (rate_changed_ && what != WaitFor::input) return Wake::control;
    if (now >= next_progress_) report_progress(now);
    if (what == WaitFor::input_end && io_.input_exhausted()) return Wake::ready;
    if (what != WaitFor::input && now >= deadline) return Wake::timeout;
    const nanoseconds progress_due = options_.progress_wakes ? next_progress_ : kForever;
    const Wake wake = io_.wait(std::min({deadline, progress_due, scheduled_.until}), what);
    if (wake == Wake::control) {
      if (std::optional<control::NewRate> sent = io_.take_new_rate())
        apply(std::move(*sent), io_.now());
      // At once, not at the next tick: `ratelimit set` waits for the status this publishes.
      if (on_progress_) report_progress(io_.now());
      continue;
    }
    // A ready for input_end is news to check at the top: the input may still hold bytes.
    if (wake == Wake::stop || (wake == Wake::ready && what == WaitFor::input)) return wake;
  }
}

nanoseconds Engine::time_of(std::int64_t units) const {
  // At most 1e9 s (about 31 years), to which a time on the clock adds without overflow.
  const double seconds = std::min(static_cast<double>(units) / totals_.rate, 1e9);
  return nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

Wake Engine::wait_for_turn(nanoseconds turn, WaitFor what) {
  const bool held_by_quota = source_.held_by_quota();
  const std::string held_by_key = source_.held_by_key();
  const nanoseconds from = io_.now();
  const Wake wake = wait(turn, what);
  if (held_by_quota) totals_.held_by_quotas += io_.now() - from;
  if (!held_by_key.empty()) totals_.held_by_keys[held_by_key] += io_.now() - from;
  return wake;
}

Wake Engine::wait_for_input() {
  const nanoseconds called_at = io_.now();
  const Wake wake = wait(kForever, WaitFor::input);
  const nanoseconds now = io_.now();
  if (wake == Wake::ready && now > called_at && own_source_ && totals_.bytes == 0 && begin_ == end_)
    own_source_->restart(now);
  return wake;
}

void Engine::report_progress(nanoseconds now) {
  totals_.now = now;
  totals_.held_by_quota = source_.held_by_quota();
  totals_.held_by_key = source_.held_by_key();
  on_progress_(totals_);
  while (next_progress_ <= now) next_progress_ += options_.progress_interval;
}

void Engine::follow_schedule(nanoseconds now) {
  for (std::size_t i = 0; i < options_.key_schedules.size(); ++i) {
    const RatePeriod period = options_.key_schedules[i]->at(now);
    const bool moved_on = period.units_per_second != key_scheduled_[i].units_per_second;
    key_scheduled_[i] = period;
    if (!moved_on) continue;
    source_.apply_key_timetable_entry(i, period.units_per_second, period.entry_until, now);
    size_chunk();
  }
  if (!options_.schedule) return;
  const RatePeriod period = options_.schedule->at(now);
  const bool moved_on = period.units_per_second != scheduled_.units_per_second;
  scheduled_ = period;
  if (moved_on && period.units_per_second != totals_.rate) {
    source_.apply_timetable_entry(period.units_per_second, period.entry_until, now);
    note_rate(period.units_per_second, now);
  }
}

void Engine::apply(control::NewRate sent, nanoseconds now) {
  if (const double* rate = std::get_if<double>(&sent)) {
    if (*rate == totals_.rate) return;
    source_.set_rate(*rate, now);
    note_rate(*rate, now);
    return;
  }
  if (!options_.schedule) return;
  options_.schedule->follow(std::get<Timetable>(sent));
  scheduled_ = options_.schedule->at(now);
  source_.set_timetable(std::get<Timetable>(sent), scheduled_.units_per_second,
                        scheduled_.entry_until, now);
  note_rate(scheduled_.units_per_second, now);
}

void Engine::take_rate_news() {
  if (const std::optional<double> rate = source_.rate_set_elsewhere()) note_rate(*rate, io_.now());
  // Another key's rate may have changed at that turn too.
  size_chunk();
}

void Engine::size_chunk() {
  if (options_.default_chunk_limit)
    options_.chunk_units = options_.default_chunk(
        std::min(totals_.rate, source_.slowest_other_key_rate()), *options_.default_chunk_limit);
}

void Engine::note_rate(double units_per_second, nanoseconds now) {
  if (units_per_second == totals_.rate) return;
  rate_changed_ = true;
  totals_.rate = units_per_second;
  size_chunk();
  rate_changes_.push_back({now, units_per_second});
}

Result Engine::stop_after_writing_buffer() {
  const int signal = io_.stop_signal();
  stopping_ = true;
  const Written written = write_due_give_back_rest();
  return finish(written == Written::downstream_closed ? Ending::downstream_closed : Ending::stopped,
                signal);
}

std::optional<Ending> Engine::refusal(nanoseconds turn) {
  const nanoseconds wait = turn - io_.now();
  // A turn the source refused is not booked: never waited for, though by now it may seem near.
  const bool refused = source_.refused();
  std::optional<Ending> ending;
  if (options_.stop_at_quota && (refused || wait > nanoseconds::zero()) && source_.held_by_quota())
    ending = Ending::quota_spent;
  else if (refused || (options_.longest_wait && wait > *options_.longest_wait))
    ending = Ending::wait_too_long;
  if (ending) refused_wait_ = std::max(wait, nanoseconds::zero());
  return ending;
}

Result Engine::end_refused(Ending ending) {
  stopping_ = true;
  if (write_due_give_back_rest() == Written::downstream_closed)
    return finish(Ending::downstream_closed);
  return finish(ending);
}

Engine::Written Engine::write_due_give_back_rest() {
  std::size_t due = due_;
  if (!options_.unit.counts_bytes()) {
    // A record begun goes out whole: its units are charged.
    const char delimiter = *options_.unit.delimiter;
    const char* const first = buffer_.data() + begin_;
    const char* const last = buffer_.data() + end_;
    if (due > 0 ? first[due - 1] != delimiter : inside_record_ && first != last) {
      const char* const record_end = std::find(first + due, last, delimiter);
      if (record_end == last) complete_last_record();
      due = record_end == last ? end_ - begin_ : static_cast<std::size_t>(record_end + 1 - first);
    }
  }
  const std::size_t rest = end_ - begin_ - due;
  if (rest > 0 && io_.unread(rest)) {
    end_ -= rest;
  } else if (rest > 0) {
    // Read from a pipe, it can only go out: late for the rate rather than lost.
    complete_last_record();
    due = end_ - begin_;
  }
  // Unless another stop signal cuts the wait for the output short.
  return write_buffered(due, io_.now());
}

Result Engine::finish(Ending ending, int signal) {
  // After a stop signal the store is not asked again for the run: the process ends at once.
  if (ending != Ending::stopped) source_.finish();
  totals_.now = io_.now();
  // The key that refused the turn, for the line that says why the run ended.
  totals_.held_by_key = source_.held_by_key();
  if (on_progress_) on_progress_(totals_);
  Result result{ending, signal, totals_, rate_changes_};
  result.refused_wait = refused_wait_;
  return result;
}

std::vector<KeyQuotaStatus> Engine::quota_status() {
  if (options_.quotas.empty()) return {};
  return source_.quota_status(io_.now());
}

}  // namespace ratelimit::pipe
