#include "backends/fallback_backend.hpp"

#include <gtest/gtest.h>

#include "errors.hpp"
#include "fake_clock.hpp"
#include "fake_waiter.hpp"

namespace ratelimit::backends {
namespace {

using namespace std::chrono_literals;

// Answers with a fixed wait, or fails as an unreachable store, counting the calls.
class ScriptedBackend final : public BucketBackend {
 public:
  explicit ScriptedBackend(std::chrono::nanoseconds wait) : wait_(wait) {}
  Reservation reserve(const PermitRequest&, io::Waiter&) override {
    ++calls;
    if (down) throw BackendUnavailable("Redis at redis://h: Connection refused");
    return {.granted = true, .wait = wait_, .signal = 0, .replaced_params = {}};
  }
  std::vector<BucketStatus> status(const std::optional<std::string>&) override {
    if (down) throw BackendUnavailable("down");
    return {};
  }
  bool reset(const std::string&) override { return !down; }
  void give_back(const std::string&, std::int64_t permits) override {
    if (down) throw BackendUnavailable("down");
    given_back += permits;
  }
  bool set_rate(const std::string&, double, const backends::KeySchedule&) override { return !down; }

  bool down = false;
  int calls = 0;
  std::int64_t given_back = 0;

 private:
  std::chrono::nanoseconds wait_;
};

struct Fixture {
  explicit Fixture(OnUnavailable policy) {
    auto owned = std::make_unique<ScriptedBackend>(7ms);
    shared = owned.get();
    backend = std::make_unique<FallbackBackend>(
        std::move(owned), policy,
        [this] {
          ++locals_opened;
          auto opened = std::make_unique<ScriptedBackend>(30ms);
          local = opened.get();
          return opened;
        },
        [this](const std::string& warning) { warnings.push_back(warning); });
  }
  Reservation reserve() {
    PermitRequest request;
    request.key = "api";
    return backend->reserve(request, waiter);
  }

  testing::FakeClock clock;
  testing::FakeWaiter waiter{clock};
  ScriptedBackend* shared;
  ScriptedBackend* local = nullptr;
  int locals_opened = 0;
  std::unique_ptr<FallbackBackend> backend;
  std::vector<std::string> warnings;
};

TEST(FallbackBackend, FailPassesTheErrorOn) {
  Fixture fixture(OnUnavailable::fail);
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  fixture.shared->down = true;
  EXPECT_THROW(fixture.reserve(), BackendUnavailable);
  EXPECT_TRUE(fixture.warnings.empty());
}

TEST(FallbackBackend, AllowGrantsAtOnceAfterOneWarningAndNeverAsksAgain) {
  Fixture fixture(OnUnavailable::allow);
  EXPECT_EQ(fixture.reserve().wait, 7ms);
  fixture.shared->down = true;
  EXPECT_EQ(fixture.reserve().wait, 0ms);
  fixture.shared->down = false;
  EXPECT_EQ(fixture.reserve().wait, 0ms);
  EXPECT_EQ(fixture.shared->calls, 2);
  EXPECT_EQ(fixture.warnings, std::vector<std::string>{
                                  "Redis at redis://h: Connection refused; running unthrottled"});
}

TEST(FallbackBackend, LocalSwitchesToTheLocalBucketForTheRestOfTheRun) {
  Fixture fixture(OnUnavailable::local);
  fixture.shared->down = true;
  EXPECT_EQ(fixture.reserve().wait, 30ms);
  fixture.shared->down = false;
  EXPECT_EQ(fixture.reserve().wait, 30ms);
  EXPECT_EQ(fixture.shared->calls, 1);
  EXPECT_EQ(fixture.local->calls, 2);
  EXPECT_EQ(fixture.locals_opened, 1);
  EXPECT_EQ(fixture.warnings,
            std::vector<std::string>{"Redis at redis://h: Connection refused; using this host's "
                                     "bucket 'api'"});
}

TEST(FallbackBackend, StatusAndResetFailWhateverThePolicy) {
  Fixture fixture(OnUnavailable::local);
  fixture.shared->down = true;
  EXPECT_THROW(fixture.backend->status(std::nullopt), BackendUnavailable);
  EXPECT_FALSE(fixture.backend->reset("api"));
  EXPECT_FALSE(fixture.backend->set_rate("api", 2, {}));
  EXPECT_EQ(fixture.locals_opened, 0);
}

TEST(FallbackBackend, PermitsGoBackWhereTheyWereBooked) {
  Fixture up(OnUnavailable::local);
  up.reserve();
  up.backend->give_back("api", 5);
  EXPECT_EQ(up.shared->given_back, 5);

  Fixture local(OnUnavailable::local);
  local.shared->down = true;
  local.reserve();
  local.backend->give_back("api", 6);
  ASSERT_NE(local.local, nullptr);
  EXPECT_EQ(local.local->given_back, 6);

  Fixture unthrottled(OnUnavailable::allow);
  unthrottled.shared->down = true;
  unthrottled.reserve();
  unthrottled.backend->give_back("api", 7);  // nowhere: nothing was booked
}

}  // namespace
}  // namespace ratelimit::backends
