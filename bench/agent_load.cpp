// agent_load [--clients K] [--keys N] [--seconds T | --decisions N] ACQUIRE-OPTIONS...
//
// The load of many hosts' loops on one host agent, without a process start per decision: K
// clients, each a thread with a connection of its own to the agent of the state directory, send
// acquire requests back to back for T seconds (default 5) or N decisions in all. Each request is
// what `ratelimit acquire ACQUIRE-OPTIONS` makes (its options, parsed by the same code) and goes
// the same way: the admission, the Redis store, the relay client and the agent's socket (an agent
// must run: one started by this program would be this program). With
// --keys N > 1, requests go round the keys KEY.0 to KEY.(N-1) (KEY: --key). With --no-agent, each
// client keeps a connection of its own to Redis instead. Prints one line:
//   decisions=D failures=F seconds=S decisions_per_second=R p50_us=P p99_us=Q [agent_decisions=A]
// where D counts the requests granted, F those refused or failed (the first failure's message
// goes to stderr), S the time from the start to the last client's end, P and Q percentiles of the
// time per request, and A the decisions the agent says it made meanwhile (through the agent).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent.hpp"
#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "exec/admission.hpp"
#include "io/background_task.hpp"

namespace {

using std::chrono::nanoseconds;
using namespace ratelimit;

struct LoadOptions {
  int clients = 1;
  int keys = 1;
  double seconds = 5.0;
  std::int64_t decisions = 0;  // 0: for `seconds`
};

// What one client did.
struct ClientTally {
  std::int64_t granted = 0;
  std::int64_t failed = 0;
  std::vector<nanoseconds> times{};
  nanoseconds ended{0};
};

double percentile_us(std::vector<nanoseconds>& times, double fraction) {
  if (times.empty()) return 0.0;
  const auto at = static_cast<std::size_t>(fraction * static_cast<double>(times.size() - 1));
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(at), times.end());
  return static_cast<double>(times[at].count()) / 1e3;
}

int run_load(const LoadOptions& load, const cli::PermitOptions& acquire) {
  if (acquire.key.empty()) throw UsageError("agent_load needs --key NAME");
  const cli::ParsedBucket bucket = cli::bucket_of(acquire.bucket, format::Counted::permits);
  std::vector<std::string> keys;
  for (int i = 0; i < load.keys; ++i)
    keys.push_back(load.keys == 1 ? acquire.key : fmt::format("{}.{}", acquire.key, i));

  // Through the agent, the agent must be there: without one, every client would go direct.
  std::optional<agent::AgentReport> agent_before;
  if (acquire.store.stores.redis.agent) {
    agent_before = agent::ask_agent(acquire.store.state_dir);
    if (!agent_before)
      throw UsageError(
          fmt::format("no agent answers in {}: start one first (ratelimit agent "
                      "--state-dir DIR) or give --no-agent",
                      acquire.store.state_dir));
  }

  std::vector<ClientTally> tallies(static_cast<std::size_t>(load.clients));
  std::latch finished(load.clients);
  std::mutex first_failure_mutex;
  std::string first_failure;
  const nanoseconds start = io::monotonic_now();
  const nanoseconds end_by = load.decisions > 0
                                 ? nanoseconds::max()
                                 : start + std::chrono::duration_cast<nanoseconds>(
                                               std::chrono::duration<double>(load.seconds));
  std::vector<std::unique_ptr<io::BackgroundTask>> clients;
  for (int c = 0; c < load.clients; ++c) {
    const std::int64_t quota =
        load.decisions / load.clients + (c < load.decisions % load.clients ? 1 : 0);
    clients.push_back(io::run_in_background([&, c, quota](io::Waiter& waiter) {
      ClientTally& tally = tallies[static_cast<std::size_t>(c)];
      const auto note_failure = [&](const std::string& message) {
        ++tally.failed;
        const std::lock_guard lock(first_failure_mutex);
        if (first_failure.empty()) first_failure = message;
      };
      try {
        // A connection of its own, as every `ratelimit acquire` process has.
        stores::StoresOptions own = acquire.store.stores;
        // Never one started: it would run this program, not ratelimit.
        if (own.redis.agent)
          own.redis.agent = std::make_shared<agent::AgentClient>(acquire.store.state_dir, false);
        const std::unique_ptr<stores::BucketStore> store = stores::open_store(own);
        for (std::int64_t n = 0; load.decisions > 0 ? n < quota : waiter.now() < end_by; ++n) {
          const nanoseconds sent = waiter.now();
          exec::AdmissionRequest request{.permits = cli::to_permit_request(acquire, bucket, sent)};
          request.permits.key = keys[static_cast<std::size_t>(c + n) % keys.size()];
          try {
            const exec::Admission admission = exec::admit(*store, nullptr, waiter, request);
            if (admission.result == exec::AdmissionResult::admitted)
              ++tally.granted;
            else
              note_failure(admission.result == exec::AdmissionResult::refused ? "refused"
                                                                              : "interrupted");
          } catch (const std::exception& error) {
            note_failure(error.what());
          }
          tally.times.push_back(waiter.now() - sent);
        }
      } catch (const std::exception& error) {
        note_failure(error.what());
      }
      tally.ended = waiter.now();
      finished.count_down();
    }));
  }
  finished.wait();
  clients.clear();

  ClientTally all;
  for (ClientTally& tally : tallies) {
    all.granted += tally.granted;
    all.failed += tally.failed;
    all.times.insert(all.times.end(), tally.times.begin(), tally.times.end());
    all.ended = std::max(all.ended, tally.ended);
  }
  if (!first_failure.empty()) fmt::print(stderr, "agent_load: first failure: {}\n", first_failure);
  const double seconds = std::chrono::duration<double>(all.ended - start).count();
  fmt::print(
      "decisions={} failures={} seconds={:.3f} decisions_per_second={:.0f} p50_us={:.1f} "
      "p99_us={:.1f}",
      all.granted, all.failed, seconds, static_cast<double>(all.granted) / seconds,
      percentile_us(all.times, 0.5), percentile_us(all.times, 0.99));
  // The agent's own count: every decision went through it (other processes' too, if any).
  if (agent_before) {
    const std::optional<agent::AgentReport> agent_after = agent::ask_agent(acquire.store.state_dir);
    fmt::print(" agent_decisions={}",
               agent_after ? fmt::to_string(agent_after->decisions - agent_before->decisions)
                           : std::string("-"));
  }
  fmt::print("\n");
  return all.failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"agent_load: acquire requests back to back through one host agent", "agent_load"};
  LoadOptions load;
  cli::PermitOptions acquire;
  cli::add_permit_options(app, acquire);
  app.add_option("--clients", load.clients, "Connections to the agent, one thread each")
      ->check(CLI::Range(1, 4096));
  app.add_option("--keys", load.keys, "Keys the requests go round (KEY.0 ...)")
      ->check(CLI::Range(1, 1 << 20));
  auto* seconds = app.add_option("--seconds", load.seconds, "How long to send [default: 5]")
                      ->check(CLI::Range(0.001, 3600.0));
  app.add_option("--decisions", load.decisions, "Requests to send in all, instead")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
      ->excludes(seconds);
  return cli::run_command({&app, [&] {
                             try {
                               app.parse(argc, argv);
                             } catch (const CLI::CallForHelp& help) {
                               return app.exit(help);
                             }
                             return run_load(load, acquire);
                           }});
}
