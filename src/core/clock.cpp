#include "ratelimit/clock.hpp"

#include <thread>

namespace ratelimit {
namespace {

class SteadyClock final : public Clock {
 public:
  std::chrono::nanoseconds now() override {
    return std::chrono::steady_clock::now().time_since_epoch();
  }
  void sleep_for(std::chrono::nanoseconds d) override {
    if (d > std::chrono::nanoseconds::zero()) std::this_thread::sleep_for(d);
  }
};

}  // namespace

Clock& system_clock() {
  static SteadyClock clock;
  return clock;
}

}  // namespace ratelimit
