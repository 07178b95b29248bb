#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/waiter.hpp"
#include "ratelimit/quota.hpp"
#include "ratelimit/timetable.hpp"
#include "ratelimit/token_bucket.hpp"
#include "stores/bucket_store.hpp"

namespace ratelimit::pipe {

// What a turn is worth once it has come (PermitSource::check_turn()).
enum class TurnCheck {
  holds,    // the units may move
  paused,   // the key was paused since they were booked: the turn is void, ask for it again
  stopped,  // a stop signal ended the call to the store
};

// A quota of the pipe's bucket as of now, and the key it is of (with several keys; empty with one).
struct KeyQuotaStatus {
  std::string key;
  stores::QuotaStatus quota;
};

// Where the pipe engine takes its permits: "N units now: when may they go?", and "the rate is
// now R". The engine never looks at the bucket behind it.
class PermitSource {
 public:
  virtual ~PermitSource() = default;
  // When up to `units` may be moved, on the engine's clock; none when a stop signal ended the
  // call to the store first. `units_ready`, when the input can say, are the units it holds now,
  // these included (without quotas: only where they are all it still gives): nothing is booked
  // ahead once they are booked.
  // Throws what the store threw when it cannot answer.
  virtual std::optional<std::chrono::nanoseconds> due_time(
      std::int64_t units, std::chrono::nanoseconds now,
      std::optional<std::int64_t> units_ready) = 0;
  // `units` were moved at `moved_at`, as requested at `requested_at`.
  virtual void consume(std::int64_t units, std::chrono::nanoseconds requested_at,
                       std::chrono::nanoseconds moved_at) = 0;
  // Called when the turn that due_time() gave has come, before its units move: whether they may
  // move now. A pause on a shared key that began after they were booked voids them (the pause
  // took their turn): due_time() is then asked again, and its turn is after the pause.
  virtual TurnCheck check_turn() { return TurnCheck::holds; }
  // A rate set by hand (`ratelimit set`), from now on.
  virtual void set_rate(double units_per_second, std::chrono::nanoseconds now) = 0;
  // The timetable followed moved on to an entry: its rate from now on, as change_rate() makes it
  // (not converted as a rate set by hand), and its end, `entry_until` (Unix seconds).
  virtual void apply_timetable_entry(double units_per_second, std::int64_t entry_until,
                                     std::chrono::nanoseconds now) = 0;
  // A timetable set by hand, from now on; its entry in force has this rate and end. A source
  // that no one else follows keeps no timetable: only the rate, as set by hand.
  virtual void set_timetable(const Timetable& /*timetable*/, double units_per_second,
                             std::int64_t /*entry_until*/, std::chrono::nanoseconds now) {
    set_rate(units_per_second, now);
  }
  // With several keys: the timetable of the other key `other_key` (0 for the second key) moved on
  // to an entry, as apply_timetable_entry() for the first key.
  virtual void apply_key_timetable_entry(std::size_t /*other_key*/, double /*units_per_second*/,
                                         std::int64_t /*entry_until*/,
                                         std::chrono::nanoseconds /*now*/) {}
  // With several keys: the lowest rate of the keys besides the first, as the source knows them
  // now (their timetables' entries and their other users' changes); infinity when none.
  virtual double slowest_other_key_rate() const { return std::numeric_limits<double>::infinity(); }
  // The run is over, not by a stop signal: nothing more is asked for. Never throws: what is left
  // to tidy up is best effort.
  virtual void finish() {}
  // The rate that permits come at when someone else changed it since the last call (another user
  // of a shared key); none otherwise.
  virtual std::optional<double> rate_set_elsewhere() { return std::nullopt; }
  // Whether a quota, not the rate, set the last due_time().
  virtual bool held_by_quota() const { return false; }
  // With several keys, the key whose turn set the last due_time() (the latest of the keys'); empty
  // when none held it back or there is one key.
  virtual std::string held_by_key() const { return {}; }
  // The turns that the engine will not wait for (EngineOptions::longest_wait, stop_at_quota), so
  // that a source that books before the wait does not book them.
  virtual void refuse_turns(std::optional<std::chrono::nanoseconds> /*longest_wait*/,
                            bool /*at_quota*/) {}
  // Whether the units of the last due_time() were refused, for refuse_turns(): none was booked,
  // and its time is the turn that would have been theirs.
  virtual bool refused() const { return false; }
  // The quotas of the bucket (of every key) as of `now`; none if it has none, or if they cannot be
  // known.
  virtual std::vector<KeyQuotaStatus> quota_status(std::chrono::nanoseconds /*now*/) { return {}; }
};

// The pipe's own bucket and quotas: the turn is the later of the bucket's next free time and the
// moment the quotas allow, and units are booked once moved: at the time they were asked for in the
// bucket (only what moved is charged; the wait is the same, as Guava's cost is paid by the next
// request), at the time they moved in the quotas (a late wake-up counts where the units went).
class LocalPermitSource final : public PermitSource {
 public:
  LocalPermitSource(const BucketParams& params, const std::vector<QuotaParams>& quotas,
                    std::chrono::nanoseconds now);
  std::optional<std::chrono::nanoseconds> due_time(
      std::int64_t units, std::chrono::nanoseconds now,
      std::optional<std::int64_t> units_ready) override;
  void consume(std::int64_t units, std::chrono::nanoseconds requested_at,
               std::chrono::nanoseconds moved_at) override;
  void set_rate(double units_per_second, std::chrono::nanoseconds now) override;
  void apply_timetable_entry(double units_per_second, std::int64_t entry_until,
                             std::chrono::nanoseconds now) override;
  bool held_by_quota() const override { return held_by_quota_; }
  std::vector<KeyQuotaStatus> quota_status(std::chrono::nanoseconds now) override;
  // A new bucket from `now` on, at the rate in force: for a run whose input had not started. The
  // quotas keep what they counted.
  void restart(std::chrono::nanoseconds now);

 private:
  QuotaBucket bucket_;
  bool held_by_quota_ = false;
};

// A bucket that other pipes and commands share through a store: one atomic booking per chunk,
// made before the units move, so two users never take the same turn. One chunk more is kept
// booked ahead: its booking is made when the current one's turn comes (check_turn()), so that a
// wake-up a little late finds the key still busy with this pipe's next chunk instead of idle
// (idle time would be stored as a burst for everyone); none past the end of an input that is
// known to end. Its answer also says whether the key is paused (backing off) at that moment: a
// pause that began after the current chunk was booked voids the chunk, so that nothing goes out
// during a pause, at no store call more than the booking ahead (one call for a turn that books
// nothing ahead).
// Units booked and not moved (a short read, the end of a slow producer's burst) are kept as
// local credit for the next turn: never booked twice. At the end of the run they are given back to
// the key as far as no one else booked after them, so that a loop of short pipes on one key gets
// the key's whole rate and pipes that share it stay smooth; a give-back that fails is only a
// warning, as the data has gone out. A booking ahead that fails leaves the turn
// already booked to go; the failure is thrown once those units are used, or at the next turn. The
// key owns its settings: the request's make a new key, and on a key that has others the source
// follows the key's (saying so through `on_followed` when the store says to tell), so that users
// with other parameters never change the key. A timetable's change of entry goes to the key with
// the next booking (the first user past it moves the key on); when the key's timetable is another
// than the one followed (set by another user), `on_key_timetable` is told, so that the pipe follows
// the key's.
// With more keys (`more_keys`: a pipe with several --key), each booking is one call over all of
// them (BucketStore::reserve_all): its turn is the latest any key gives, booked on every key at
// once, and a refused turn takes nothing from any key; a pause on any key holds the pipe, and
// what goes back goes back to every key, each from its own latest bookings. The first key is the
// pipe's: `set` and rate news are its; each other key follows its own timetable's entries
// (apply_key_timetable_entry()) and what its other users set, and a booking is sized by the
// slowest key.
class SharedPermitSource final : public PermitSource {
 public:
  using OnFollowed =
      std::function<void(const std::string& key, const stores::KeySettings& key_settings)>;
  // `key`'s timetable is another than the one followed (set by another user).
  using OnKeyTimetable = std::function<void(const std::string& key, const std::string& timetable)>;
  using Warn = std::function<void(const std::string& warning)>;
  // `key`'s pause made this pipe wait `waited` (said once the wait is over).
  using OnPaused = std::function<void(const std::string& key, std::chrono::nanoseconds waited)>;

  // `waiter` is on the engine's clock; `request` names the key, the parameters and the timetable
  // (its permits and deadline are the source's business), `more_keys` the other keys' alike.
  SharedPermitSource(stores::BucketStore& store, stores::PermitRequest request, io::Waiter& waiter,
                     OnFollowed on_followed = {}, OnKeyTimetable on_key_timetable = {},
                     Warn warn = {}, OnPaused on_paused = {},
                     std::vector<stores::PermitRequest> more_keys = {});
  std::optional<std::chrono::nanoseconds> due_time(
      std::int64_t units, std::chrono::nanoseconds now,
      std::optional<std::int64_t> units_ready) override;
  TurnCheck check_turn() override;
  void consume(std::int64_t units, std::chrono::nanoseconds requested_at,
               std::chrono::nanoseconds moved_at) override;
  void set_rate(double units_per_second, std::chrono::nanoseconds now) override;
  void apply_timetable_entry(double units_per_second, std::int64_t entry_until,
                             std::chrono::nanoseconds now) override;
  void set_timetable(const Timetable& timetable, double units_per_second, std::int64_t entry_until,
                     std::chrono::nanoseconds now) override;
  void apply_key_timetable_entry(std::size_t other_key, double units_per_second,
                                 std::int64_t entry_until, std::chrono::nanoseconds now) override;
  double slowest_other_key_rate() const override;
  void finish() override;
  std::optional<double> rate_set_elsewhere() override { return std::exchange(key_rate_news_, {}); }
  bool held_by_quota() const override { return credit_held_by_quota_; }
  std::string held_by_key() const override { return credit_held_by_key_; }
  void refuse_turns(std::optional<std::chrono::nanoseconds> longest_wait, bool at_quota) override;
  bool refused() const override { return refused_; }
  // Each key's, as the store keeps them, named by key when there are several; none of a key whose
  // store cannot say (a warning then).
  std::vector<KeyQuotaStatus> quota_status(std::chrono::nanoseconds now) override;

  // Units booked and not yet moved, the chunk booked ahead included.
  std::int64_t booked_unused() const { return credit_ + ahead_; }

 private:
  // A key besides the first, and its latest bookings that followed each other (as tail_).
  struct OtherKey {
    stores::PermitRequest request;
    stores::BookingSpan tail{};
    std::int64_t tail_units = 0;
  };
  // Books `units`; none if a stop signal ended the call, else when they are due. With
  // `waited_from`, refused (last_refused_, nothing booked) if the turn is one that refuse_turns()
  // said is not waited for from then on; the time is then the turn refused.
  std::optional<std::chrono::nanoseconds> book(
      std::int64_t units, std::optional<std::chrono::nanoseconds> waited_from = std::nullopt);
  // The store's answer to a booking of request_'s permits: one key's, or the call's over all keys
  // (the first key's settings, the call's turn), each other key's taken up.
  stores::Reservation reserve();
  // A booking of the other key `key` granted in a call over several keys, as book() takes up the
  // first key's.
  void take_up(OtherKey& key, const stores::Reservation& reservation);
  // The rate that sizes a booking: the slowest key's.
  double booking_rate() const;
  // Gives `permits` back to the other keys, each from its own latest bookings.
  void give_back_other_keys(std::int64_t permits);
  // What a look at the key's pause found; none: no look was made.
  enum class Look { none, clear, paused, stopped };
  // Books the chunk ahead at the credit's turn, its answer the look (none past the input's known
  // end, where there is nothing to book).
  Look book_ahead();
  // Asks the store for the key's pause: for a turn whose credit no answer has seen yet.
  Look look_at_pause();
  // What a booking of `booked` units keeps when it found the key's rate lower than `rate_before`:
  // sized for the old rate, it would hold the key (this pipe's next chunk included) at the new one
  // (5000 bytes at 2 kB/s: 2.5 s), so what a chunk at the new rate does not need goes back at once.
  std::int64_t trimmed(std::int64_t booked, double rate_before);

  stores::BucketStore& store_;
  stores::PermitRequest request_;
  io::Waiter& waiter_;
  OnFollowed on_followed_;
  OnKeyTimetable on_key_timetable_;
  Warn warn_;
  OnPaused on_paused_;
  std::int64_t credit_ = 0;
  std::chrono::nanoseconds credit_due_{0};
  std::int64_t ahead_ = 0;  // the chunk booked ahead
  std::chrono::nanoseconds ahead_due_{0};
  // Whether the credit's turn came with the key not paused (check_turn(), or the answer that
  // booked it when its turn had come by then): units booked since are not yet.
  bool credit_checked_ = false;
  // The last due_time()'s units and units_ready, which the booking ahead follows.
  std::int64_t units_asked_ = 0;
  std::optional<std::int64_t> units_ready_;
  // How long the key was paused when the last booking was decided.
  std::chrono::nanoseconds last_paused_for_{0};
  // The pause this pipe waits for, from when it was seen to its latest end seen; none when it
  // waits for none.
  std::optional<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>> pause_waited_;
  // Whether a quota set the turn of the credit, of the chunk booked ahead, of the last booking.
  bool credit_held_by_quota_ = false;
  bool ahead_held_by_quota_ = false;
  bool last_held_by_quota_ = false;
  // refuse_turns()'s, and whether the last booking, and the last due_time()'s units, were refused.
  std::optional<std::chrono::nanoseconds> longest_wait_;
  bool refuse_quota_wait_ = false;
  bool last_refused_ = false;
  bool refused_ = false;
  std::optional<double> key_rate_news_;
  // This pipe's latest bookings that followed each other on the key (each found the key's next
  // free moment where the one before left it), and the units they booked: what may go back.
  stores::BookingSpan tail_{};
  std::int64_t tail_units_ = 0;
  std::vector<OtherKey> more_keys_;
  // The key whose turn the credit's, the chunk booked ahead's and the last booking's is (several
  // keys); empty: none held it back.
  std::string credit_held_by_key_;
  std::string ahead_held_by_key_;
  std::string last_held_by_key_;
  // The key whose pause this pipe waits for, the longest.
  std::string paused_key_;
  std::int64_t largest_booking_ = 0;  // units booked at once at the most
  std::exception_ptr failure_;        // of the booking ahead, thrown once the credit is used up
};

}  // namespace ratelimit::pipe
