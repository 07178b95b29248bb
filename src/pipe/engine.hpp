#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "pipe/chunk.hpp"
#include "pipe/io.hpp"
#include "pipe/permit_source.hpp"
#include "pipe/rate_schedule.hpp"
#include "ratelimit/quota.hpp"
#include "ratelimit/token_bucket.hpp"

namespace ratelimit::pipe {

// What the rate counts: bytes, or records ended by a delimiter ('\n' for lines, '\0' for -0).
struct Unit {
  std::optional<char> delimiter;  // none: bytes

  bool counts_bytes() const { return !delimiter.has_value(); }
};

struct EngineOptions {
  BucketParams bucket;
  // At most N units in any window of the period, beside the rate (--quota).
  std::vector<QuotaParams> quotas;
  Unit unit;
  // Units per write: small enough that the output looks smooth, large enough to be cheap.
  std::int64_t chunk_units = 1;
  // Set when the chunk was not given as a size: it follows the rate in force, as
  // default_chunk_units(rate, *default_chunk_limit, chunk_interval), also after a new rate from
  // `ratelimit set`.
  std::optional<std::int64_t> default_chunk_limit;
  // None: default_write_interval of the unit.
  std::optional<std::chrono::nanoseconds> chunk_interval;
  // Spliced, each chunk is written in equal parts of at most write interval / writes_per_chunk of
  // the rate, each at its share of the chunk's time after the chunk's turn (a shared pipe's:
  // shared_writes_per_chunk()); a chunk that one part covers goes whole.
  int writes_per_chunk = 1;
  // Room for records in record modes and the largest write in byte mode.
  std::size_t buffer_bytes = 256 * 1024;
  // How often `on_progress` is called while data flows or waits.
  std::chrono::nanoseconds progress_interval = std::chrono::milliseconds(100);
  // Whether a wait is cut short to call `on_progress` on time. A progress line that a person
  // watches is; a status record alone (for `ratelimit status`) is refreshed at the wake-ups the
  // data makes anyway, as a wake-up of its own would double a slow pipe's CPU.
  bool progress_wakes = true;
  // The longest wait for a turn (--timeout): a turn further away ends the run instead
  // (Ending::wait_too_long). None: any wait.
  std::optional<std::chrono::nanoseconds> longest_wait;
  // Whether a turn that a quota holds back ends the run instead of being waited for
  // (--stop-at-quota, Ending::quota_spent).
  bool stop_at_quota = false;
  // The rate over time (a timetable), followed from the start; also what a timetable sent by
  // `ratelimit set` replaces. None: the bucket's rate throughout, and sent timetables are ignored.
  RateSchedule* schedule = nullptr;
  // With several keys: the timetables of the keys besides the first, in the source's order
  // (PermitSource::apply_key_timetable_entry()), each followed as `schedule` is (a key without
  // one: its rate throughout).
  std::vector<RateSchedule*> key_schedules;

  std::chrono::nanoseconds write_interval() const {
    return chunk_interval.value_or(default_write_interval(unit.counts_bytes()));
  }
  // The default chunk at `units_per_second`, at most `max_units`: one write interval of the rate,
  // of its coldest rate while a bucket warms up, so that no write is more than an interval's worth
  // of the rate in force (a chunk of the stable rate would be three intervals at a cold factor
  // of 3).
  std::int64_t default_chunk(double units_per_second, std::int64_t max_units) const {
    const double coldest = bucket.shape == BucketShape::warming_up
                               ? units_per_second / bucket.cold_factor
                               : units_per_second;
    return default_chunk_units(coldest, max_units, write_interval());
  }
};

// What has been moved so far.
struct Totals {
  std::uint64_t bytes = 0;
  std::uint64_t units = 0;
  std::chrono::nanoseconds started{0};
  std::chrono::nanoseconds now{0};
  double rate = 0.0;                           // the rate in force, units per second
  bool held_by_quota = false;                  // the turn waited for is a quota's, not the rate's
  std::chrono::nanoseconds held_by_quotas{0};  // waited for turns that were quotas'
  // With several keys: the key whose turn is waited for (empty: none), and how long each key held
  // the pipe, by name.
  std::string held_by_key{};
  std::map<std::string, std::chrono::nanoseconds> held_by_keys{};
};

enum class Ending {
  end_of_input,
  stopped,            // a stop signal: see Result::signal
  downstream_closed,  // the reader went away (EPIPE)
  wait_too_long,      // the next turn was further away than EngineOptions::longest_wait
  quota_spent,        // a quota held the next turn back, with EngineOptions::stop_at_quota
};

// A rate that took over while data moved, by `ratelimit set` or a timetable.
struct RateChange {
  std::chrono::nanoseconds at;  // on the engine's clock
  double rate;

  friend bool operator==(const RateChange&, const RateChange&) = default;
};

struct Result {
  Ending ending = Ending::end_of_input;
  int signal = 0;
  Totals totals;
  std::vector<RateChange> rate_changes;
  // The quotas at the end (Engine::quota_status()), for --stats: every key's.
  std::vector<KeyQuotaStatus> quotas{};
  // With wait_too_long and quota_spent: how far away the turn not waited for was.
  std::chrono::nanoseconds refused_wait{0};
};

// Moves the input to the output at the rate of a permit source: asks it when a chunk may go
// (with pay_first, not before the chunk's units exist), waits until then, writes at most a chunk,
// then tells it what was written (Guava's packet example); spliced, a chunk begun is finished as
// the input delivers it before the next turn is asked for. In record modes a wait never falls
// inside a record. Nothing is waited for after the end of the input. Nothing read is lost: at a
// stop signal, or when the permit source fails (its exception then ends run()), what is due goes
// out (the rest of a chunk being written, of a record begun) and what else was read goes back to
// the input if it can take it (a file), else out at once.
class Engine {
 public:
  using ProgressCallback = std::function<void(const Totals&)>;

  // With a bucket of its own (options.bucket).
  Engine(const EngineOptions& options, Io& io, ProgressCallback on_progress = {});
  // With permits from `source` (a shared bucket); options.bucket's rate is the one reported.
  Engine(const EngineOptions& options, Io& io, PermitSource& source,
         ProgressCallback on_progress = {});

  Result run();
  // The quotas of the bucket once run() has returned, however it ended: a shared bucket's are
  // asked of its store (--stats asks for them, after a stop signal too).
  std::vector<KeyQuotaStatus> quota_status();

 private:
  struct Span {
    std::size_t bytes;
    std::int64_t units;  // records that start in it (bytes in byte mode)
  };

  void start();
  // nullopt: splicing is impossible for these descriptors, nothing was moved by the last try.
  std::optional<Result> run_spliced();
  Result run_buffered();
  Result move_buffered();
  // Waits for the deadline (and input, if asked), serving control messages and progress ticks.
  // A new rate ends a wait for a turn with Wake::control: the turn is to be asked for again.
  Wake wait(std::chrono::nanoseconds deadline, WaitFor what);
  // wait() for a turn: the time waited counts in Totals::held_by_quotas when a quota set it.
  Wake wait_for_turn(std::chrono::nanoseconds turn, WaitFor what);
  // wait(forever, input), after which the pipe's own bucket starts anew if it waited for the
  // first input: the producer's start-up is no idle time to be stored and sent as a burst.
  Wake wait_for_input();
  // The next piece of the buffer to write; empty when more input is needed first.
  Span next_span(bool end_of_input) const;
  // Reads after the pending data, of which `complete` is the complete records (a short chunk, or
  // none); true at the end of the input.
  bool read_more(const Span& complete);
  // Turns that may be refused (--stop-at-quota, --timeout), from an input that cannot take back
  // what was read (a pipe, a terminal, a socket): each chunk's turn is asked for, waited for and
  // checked (PermitSource::check_turn()) before the chunk is read, and the input read no further
  // than the units granted, so that a refused or voided turn leaves them in the input. True for the
  // current input.
  bool books_before_reading() const;
  // Under books_before_reading(): when the units granted are all read and the input holds more,
  // waits for the turn of the next chunk (in record modes, of one record where a quota or the
  // longest wait refuses the chunk); an ending when that is refused too (nothing read) or a stop
  // came.
  std::optional<Result> await_grant();
  // Reads no further than the units granted (a record: its delimiter), as far as the input holds
  // them now; the rest of a record begun without a grant, a byte at a time to its end. True at the
  // end of the input.
  bool read_granted();
  // Moves the pending data to the start of the buffer.
  void compact_buffer();
  // Record modes, at a stop: reads the rest of a record that a read cut, as far as the input
  // holds it now.
  void complete_last_record();
  // Byte mode: doubles the buffer toward the chunk after a read that filled it.
  void grow_buffer();
  // Record modes: how much the next read may take.
  std::size_t read_ahead_bytes(const Span& complete) const;
  // Record modes: notes the lengths of the records that `bytes` read at `from` completed, the
  // first of them begun at `partial_start`.
  void note_record_lengths(std::size_t partial_start, std::size_t from, std::size_t bytes);
  enum class Written { all, downstream_closed, stopped };
  // Writes the first `bytes` of the buffer, charging the units that go out as booked at
  // `requested_at`; stops early when downstream closes or a stop signal cuts a blocked write short.
  Written write_buffered(std::size_t bytes, std::chrono::nanoseconds requested_at);
  void charge(std::size_t bytes, std::int64_t units, std::chrono::nanoseconds requested_at);
  // Byte mode: the units that can go now without waiting for input, `buffered` read and not
  // written included, when the input can say; none in record modes. A quota counts what is
  // booked whether or not its data comes, so under quotas nothing is booked before its data is
  // there: a chunk larger than what comes could wait for a window where the rest fits now.
  // Without quotas the units are said only where the input's end is known: the last chunk is
  // booked no larger than what is left, and no chunk is booked ahead beyond it (a shared pipe's
  // chunks go in parts, so that a short last chunk and the next pipe's chunk on the key never
  // share a 100 ms window whole).
  std::optional<std::int64_t> units_ready(std::size_t buffered);
  // The time that `units` take at the rate in force.
  std::chrono::nanoseconds time_of(std::int64_t units) const;
  // At a stop or a failure: writes what is due, and what was read after it unless the input takes
  // that back.
  Written write_due_give_back_rest();
  void report_progress(std::chrono::nanoseconds now);
  // Applies the schedule's rate when it has moved to another entry since the last look, and each
  // other key's (key_schedules) to the source.
  void follow_schedule(std::chrono::nanoseconds now);
  // The default chunk (default_chunk_limit) at the slowest rate among the keys: a slow key gives
  // fine chunks.
  void size_chunk();
  // A rate or timetable from `ratelimit set`.
  void apply(control::NewRate sent, std::chrono::nanoseconds now);
  // A rate that the source learnt of since the last wait (a turn's check books ahead after it):
  // the next chunk follows it.
  void take_rate_news();
  // Takes note of the rate now in force: the chunk follows it, the wait for a turn ends.
  void note_rate(double units_per_second, std::chrono::nanoseconds now);
  Result stop_after_writing_buffer();
  // The ending for a turn at `turn` that is not to be waited for (longest_wait, stop_at_quota);
  // none when it is.
  std::optional<Ending> refusal(std::chrono::nanoseconds turn);
  // Ends the run at a turn refused: what is due goes out, what else was read goes back to the
  // input if it can take it (a file), else out as well.
  Result end_refused(Ending ending);
  Result finish(Ending ending, int signal = 0);

  EngineOptions options_;
  Io& io_;
  ProgressCallback on_progress_;
  std::optional<LocalPermitSource> own_source_;
  PermitSource& source_;
  Totals totals_;
  std::chrono::nanoseconds next_progress_ = std::chrono::nanoseconds::max();
  // What the schedule said last; a rate set by hand holds until the schedule moves on.
  RatePeriod scheduled_;
  // What each of key_schedules said last.
  std::vector<RatePeriod> key_scheduled_;
  std::vector<RateChange> rate_changes_;
  std::chrono::nanoseconds refused_wait_{0};  // of the turn refused, if one was
  // Under books_before_reading(): units granted and not yet read (records: to their end).
  std::int64_t units_granted_ = 0;
  bool rate_changed_ = false;  // since the current wait began

  std::vector<char> buffer_;
  std::size_t begin_ = 0;  // unwritten data is buffer_[begin_, end_)
  std::size_t end_ = 0;
  // Record modes: the shortest record (bytes with its delimiter) of the latest read that ended one.
  std::optional<std::size_t> shortest_record_;
  bool last_read_filled_ = false;  // the last read took all it asked for: more may be there now
  bool inside_record_ = false;     // the last byte written did not end a record
  bool stopping_ = false;  // a stop signal or a failure came: writing what is due, then done
  bool failed_ = false;    // what goes out is not charged: the run failed
  // Bytes at the start of the unwritten data whose turn has come: the rest of the chunk being
  // written.
  std::size_t due_ = 0;
};

}  // namespace ratelimit::pipe
