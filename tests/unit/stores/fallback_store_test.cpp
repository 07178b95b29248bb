#include "stores/fallback_store.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "errors.hpp"
#include "fake_clock.hpp"
#include "fake_waiter.hpp"

namespace ratelimit::stores {
namespace {

using namespace std::chrono_literals;

// Answers with a fixed wait, or fails as an unreachable store, counting the calls.
class ScriptedStore final : public BucketStore {
 public:
  explicit ScriptedStore(std::chrono::nanoseconds wait) : wait_(wait) {}
  Reservation reserve(const PermitRequest& request, io::Waiter&) override {
    ++calls;
    if (down) throw StoreUnavailable("Redis at redis://h: Connection refused");
    if (script_refused)
      throw StoreUnavailable(
          "Redis at redis://h: OOM command not allowed when used memory > 'maxmemory'");
    requests.push_back(request);
    return {.granted = true,
            .wait = wait_,
            .signal = 0,
            .replaced_params = BucketParams{},
            .replaced_timetable = "other",
            .key_timetable = "key's",
            .key_permits_per_second = 1234};
  }
  std::vector<BucketStatus> status(const std::optional<std::string>&) override {
    if (down) throw StoreUnavailable("down");
    return {};
  }
  bool reset(const std::string&) override { return !down; }
  bool give_back(const stores::UnusedPermits& unused) override {
    if (down) throw StoreUnavailable("down");
    given_back += unused.permits;
    last_span = unused.booked;
    return true;
  }
  bool set_rate(const stores::RateChange&) override { return !down; }
  void ping(const std::string&, io::Waiter&) override {
    ++pings;
    if (down) throw StoreUnavailable("down");
  }

  bool down = false;
  // Answers PING, refuses every decision (out of memory, read-only).
  bool script_refused = false;
  int calls = 0;
  int pings = 0;
  std::int64_t given_back = 0;
  std::optional<BookingSpan> last_span;
  std::vector<PermitRequest> requests;

 private:
  std::chrono::nanoseconds wait_;
};

// Background work run by hand: a started task is done once the test runs it.
class ManualTask final : public io::BackgroundTask {
 public:
  bool done() const override { return *ran_; }
  explicit ManualTask(std::shared_ptr<bool> ran) : ran_(std::move(ran)) {}

 private:
  std::shared_ptr<bool> ran_;
};

struct Fixture {
  explicit Fixture(OnUnavailable action, double local_share = 1.0, std::string said_as = {}) {
    auto owned = std::make_unique<ScriptedStore>(7ms);
    shared = owned.get();
    store = std::make_unique<FallbackStore>(
        std::move(owned), "Redis at redis://h",
        UnavailablePolicy{.action = action, .local_share = local_share, .said_as = said_as},
        [this] {
          ++locals_opened;
          auto opened = std::make_unique<ScriptedStore>(30ms);
          local = opened.get();
          return opened;
        },
        [this](const std::string& warning) { warnings.push_back(warning); },
        [this](std::function<void(io::Waiter&)> work) {
          auto ran = std::make_shared<bool>(false);
          started.push_back([this, work = std::move(work), ran] {
            // As io::run_in_background, which drops what the work throws.
            try {
              work(waiter);
            } catch (const StoreUnavailable&) {
            }
            *ran = true;
          });
          return std::make_unique<ManualTask>(ran);
        });
  }
  Reservation reserve(std::int64_t permits = 1) {
    PermitRequest request;
    request.key = "api";
    request.params.permits_per_second = 100;
    request.schedule.timetable = "mine";
    request.permits = permits;
    return store->reserve(request, waiter);
  }
  // Gives `permits` of key api back (from the span `booked`).
  bool give_back(std::int64_t permits, std::optional<BookingSpan> booked = std::nullopt) {
    return store->give_back({.key = "api", .permits = permits, .booked = booked});
  }
  // Runs the background work started so far.
  void run_started() {
    for (auto& work : started) work();
    started.clear();
  }
  // `after` from now, a request (the one that starts a probe when one is due), then the probe
  // run: the next request asks the shared store if the probe found it answering.
  Reservation reserve_and_probe_after(std::chrono::nanoseconds after, std::int64_t permits = 1) {
    clock.advance(after);
    const Reservation reservation = reserve(permits);
    run_started();
    return reservation;
  }
  // Requests 10 ms apart for `duration`, the background work run after each; each request must be
  // answered with `wait`.
  void reserve_every_10ms_for(std::chrono::milliseconds duration, std::chrono::nanoseconds wait) {
    for (auto passed = std::chrono::milliseconds(0); passed < duration; passed += 10ms) {
      clock.advance(10ms);
      EXPECT_EQ(reserve().wait, wait) << "after " << passed.count() + 10 << " ms";
      run_started();
    }
  }

  // An outage in which the shared store fails as `failing` says (down, script_refused): its first
  // request and requests 10 ms apart for `duration` after it, each answered by the local bucket;
  // then the store can answer again. What it was asked meanwhile, as "pings N, calls N".
  std::string outage(bool ScriptedStore::*failing, std::chrono::milliseconds duration) {
    shared->*failing = true;
    EXPECT_EQ(reserve().wait, 30ms);
    reserve_every_10ms_for(duration, 30ms);
    shared->*failing = false;
    return "pings " + std::to_string(shared->pings) + ", calls " + std::to_string(shared->calls);
  }

  testing::FakeClock clock;
  testing::FakeWaiter waiter{clock};
  ScriptedStore* shared;
  ScriptedStore* local = nullptr;
  int locals_opened = 0;
  std::vector<std::function<void()>> started;
  std::unique_ptr<FallbackStore> store;
  std::vector<std::string> warnings;
};

TEST(FallbackStore, FailPassesTheErrorOnAndNeverProbes) {
  Fixture fixture(OnUnavailable::fail);
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  fixture.shared->down = true;
  EXPECT_THROW(fixture.reserve(), StoreUnavailable);
  fixture.clock.advance(5s);
  EXPECT_THROW(fixture.reserve(), StoreUnavailable);
  EXPECT_TRUE(fixture.started.empty());
  EXPECT_TRUE(fixture.warnings.empty());
}

TEST(FallbackStore, AllowGrantsAtOnceUntilTheStoreAnswersAgain) {
  Fixture fixture(OnUnavailable::allow, 1.0, "--on-redis-error=allow");
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  fixture.shared->down = true;
  EXPECT_EQ(fixture.reserve().wait, 0ms);
  fixture.shared->down = false;
  // Not asked again before a second has passed, and never on a request's own time.
  fixture.clock.advance(999ms);
  EXPECT_EQ(fixture.reserve().wait, 0ms);
  EXPECT_TRUE(fixture.started.empty());
  fixture.clock.advance(1ms);
  EXPECT_EQ(fixture.reserve().wait, 0ms);
  ASSERT_EQ(fixture.started.size(), 1U);
  EXPECT_EQ(fixture.shared->pings, 0);
  EXPECT_EQ(fixture.reserve().wait, 0ms);  // the probe has not answered yet
  fixture.run_started();
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  EXPECT_EQ(fixture.shared->calls, 3);
  EXPECT_EQ(fixture.warnings,
            (std::vector<std::string>{"Redis at redis://h: Connection refused; running "
                                      "unthrottled (--on-redis-error=allow)",
                                      "Redis at redis://h answers again; back on the shared "
                                      "bucket 'api' (--on-redis-error=allow)"}));
}

TEST(FallbackStore, LocalReturnsToTheSharedStoreOnceItAnswers) {
  Fixture fixture(OnUnavailable::local, 1.0, "--on-redis-error=local");
  // Asked about once a second while it does not answer; the local bucket answers meanwhile.
  EXPECT_EQ(fixture.outage(&ScriptedStore::down, 3500ms), "pings 3, calls 1");
  // Starts the probe that finds it back.
  EXPECT_EQ(fixture.reserve_and_probe_after(500ms).wait, 30ms);
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  EXPECT_EQ(fixture.shared->calls, 3);
  EXPECT_EQ(fixture.locals_opened, 1);
  EXPECT_EQ(fixture.warnings,
            (std::vector<std::string>{"Redis at redis://h: Connection refused; using this host's "
                                      "bucket 'api' (--on-redis-error=local)",
                                      "Redis at redis://h answers again; back on the shared "
                                      "bucket 'api' (--on-redis-error=local)"}));

  // A second outage is one more pair of lines.
  fixture.shared->down = true;
  EXPECT_EQ(fixture.reserve().wait, 30ms);
  fixture.shared->down = false;
  fixture.reserve_and_probe_after(1s);
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  EXPECT_EQ(fixture.warnings.size(), 4U);
}

TEST(FallbackStore, AProbeThatFindsTheStoreStillDownIsFollowedByAnotherASecondLater) {
  Fixture fixture(OnUnavailable::local);
  fixture.shared->down = true;
  fixture.reserve();
  fixture.reserve_and_probe_after(1s);
  EXPECT_EQ(fixture.shared->pings, 1);
  EXPECT_EQ(fixture.reserve().wait, 30ms);
  fixture.shared->down = false;
  fixture.clock.advance(990ms);
  EXPECT_EQ(fixture.reserve().wait, 30ms);
  EXPECT_TRUE(fixture.started.empty());
  fixture.reserve_and_probe_after(10ms);
  EXPECT_EQ(fixture.reserve().wait, 7ms);
}

TEST(FallbackStore, AStoreThatAnswersPingButRefusesTheScriptIsNotBack) {
  Fixture fixture(OnUnavailable::local, 1.0, "--on-redis-error=local");
  // Each probe answers, and the request after it is refused: still away, nothing said. Calls: the
  // first request, and one after each probe but the last (not followed by one yet).
  EXPECT_EQ(fixture.outage(&ScriptedStore::script_refused, 4000ms), "pings 4, calls 4");
  fixture.reserve_and_probe_after(1s);
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  EXPECT_EQ(fixture.warnings,
            (std::vector<std::string>{"Redis at redis://h: OOM command not allowed when used "
                                      "memory > 'maxmemory'; using this host's bucket 'api' "
                                      "(--on-redis-error=local)",
                                      "Redis at redis://h answers again; back on the shared "
                                      "bucket 'api' (--on-redis-error=local)"}));
}

TEST(FallbackStore, LocalAtAShareBooksThatShareOfTheRateAndReportsTheKeysRate) {
  Fixture fixture(OnUnavailable::local, 0.25, "--on-redis-error=local:25%");
  fixture.shared->down = true;
  const Reservation reservation = fixture.reserve();
  ASSERT_EQ(fixture.local->requests.size(), 1U);
  EXPECT_DOUBLE_EQ(fixture.local->requests[0].params.permits_per_second, 25);
  EXPECT_TRUE(fixture.local->requests[0].apply_params);
  // The user keeps following the key as it knew it.
  EXPECT_DOUBLE_EQ(reservation.key_permits_per_second, 100);
  EXPECT_EQ(reservation.key_timetable, "mine");
  EXPECT_FALSE(reservation.replaced_params);
  EXPECT_EQ(fixture.warnings, std::vector<std::string>{
                                  "Redis at redis://h: Connection refused; using this host's "
                                  "bucket 'api' at 25% of the rate (--on-redis-error=local:25%)"});
}

TEST(FallbackStore, StatusAndResetFailWhateverThePolicy) {
  Fixture fixture(OnUnavailable::local);
  fixture.shared->down = true;
  EXPECT_THROW(fixture.store->status(std::nullopt), StoreUnavailable);
  EXPECT_FALSE(fixture.store->reset("api"));
  EXPECT_FALSE(fixture.store->set_rate({.key = "api", .permits_per_second = 2, .schedule = {}}));
  EXPECT_EQ(fixture.locals_opened, 0);
}

// Whether the shared store answers during a run of given_back_after().
enum class Shared { up, away };

// A run that books `reserved` permits of key api in one request (none if 0) and then gives
// `given` back, with the shared store up or away all along: what each store got back, as "shared
// N, local N" ("local -": the run never opened its local store).
std::string given_back_after(OnUnavailable action, Shared shared, std::int64_t reserved,
                             std::int64_t given) {
  Fixture run(action);
  run.shared->down = shared == Shared::away;
  if (reserved > 0) run.reserve(reserved);
  run.give_back(given);
  return "shared " + std::to_string(run.shared->given_back) + ", local " +
         (run.local ? std::to_string(run.local->given_back) : "-");
}

TEST(FallbackStore, PermitsGoBackWhereTheyWereBooked) {
  EXPECT_EQ(given_back_after(OnUnavailable::local, Shared::up, 5, 5), "shared 5, local -");
  EXPECT_EQ(given_back_after(OnUnavailable::local, Shared::away, 6, 6), "shared 0, local 6");
  // Nowhere: nothing was booked.
  EXPECT_EQ(given_back_after(OnUnavailable::allow, Shared::away, 7, 7), "shared 0, local -");
}

TEST(FallbackStore, PermitsThisRunDidNotBookGoToTheSharedStoreUnlessItIsAway) {
  // As set_key_rate_by_hand() gives back a turn booked at an old rate by whoever used the key.
  EXPECT_EQ(given_back_after(OnUnavailable::local, Shared::up, 0, 9), "shared 9, local -");
  EXPECT_EQ(given_back_after(OnUnavailable::local, Shared::away, 2, 9), "shared 0, local 2");
}

TEST(FallbackStore, PermitsBookedAcrossAReturnGoBackToEachStoreItsPart) {
  Fixture fixture(OnUnavailable::local);
  fixture.reserve(10);  // shared
  fixture.shared->down = true;
  fixture.reserve(20);  // local
  // Booked by the shared store before it went away: not given back while it is away.
  fixture.give_back(25);
  EXPECT_EQ(fixture.local->given_back, 20);
  EXPECT_EQ(fixture.shared->given_back, 0);
  fixture.reserve(20);  // local
  fixture.shared->down = false;
  fixture.reserve_and_probe_after(1s, 20);  // local, and the probe starts
  fixture.reserve(30);                      // shared again
  fixture.give_back(45);
  EXPECT_EQ(fixture.shared->given_back, 30);
  EXPECT_EQ(fixture.local->given_back, 35);
}

TEST(FallbackStore, ASpanGoesInOneCallToTheStoreOfTheLatestBookings) {
  // A span is one store's marks: the latest bookings' store gets it with what they hold, and the
  // permits booked in the other store stay booked.
  Fixture fixture(OnUnavailable::local);
  fixture.reserve(10);  // shared
  fixture.shared->down = true;
  fixture.reserve(20);  // local
  fixture.reserve(5);   // local
  const BookingSpan span{.from = 1, .until = 2};
  fixture.give_back(40, span);
  EXPECT_EQ(fixture.local->given_back, 25);
  EXPECT_EQ(fixture.local->last_span, span);
  EXPECT_EQ(fixture.shared->given_back, 0);
}

}  // namespace
}  // namespace ratelimit::stores
