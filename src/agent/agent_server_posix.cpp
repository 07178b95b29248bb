#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "agent/agent.hpp"
#include "agent/agent_protocol.hpp"
#include "io/background_task.hpp"
#include "io/posix.hpp"
#include "state/state_directory.hpp"
#include "stores/open_store.hpp"

namespace ratelimit::agent {
namespace {

using std::chrono::nanoseconds;

// How long a new agent waits for the lock of one that is ending: it unlocks a few
// microseconds after it removed its socket.
constexpr std::chrono::microseconds kLockPause{1000};
constexpr int kLockTries = 100;

volatile sig_atomic_t stop_signal = 0;

void record_stop(int signal) { stop_signal = signal; }

// While alive, SIGTERM, SIGINT and SIGHUP are blocked but for the one ppoll wait of the loop,
// where their handler only records them; SIGPIPE is ignored (a client gone is an error return).
class AgentSignals {
 public:
  AgentSignals() : blocked_(handled_stops()), waiting_mask_(blocked_.previous()) {
    ::signal(SIGPIPE, SIG_IGN);
    for (const int signal : kStops) sigdelset(&waiting_mask_, signal);
  }
  const sigset_t* waiting_mask() const { return &waiting_mask_; }

 private:
  static constexpr std::array kStops = {SIGTERM, SIGINT, SIGHUP};

  // The stop signals, each given to record_stop.
  static sigset_t handled_stops() {
    sigset_t stops;
    sigemptyset(&stops);
    struct sigaction action {};
    action.sa_handler = record_stop;
    sigemptyset(&action.sa_mask);
    for (const int signal : kStops) {
      sigaddset(&stops, signal);
      ::sigaction(signal, &action, nullptr);
    }
    return stops;
  }

  const io::BlockedSignals blocked_;
  sigset_t waiting_mask_;
};

// What a client is answered through, shared by the main thread, which reads its requests, and the
// route threads, which answer them: an answer is written by the thread that has it, as soon as
// those to the client's earlier requests are out, so that a lone request's answer goes from the
// route that served it straight to its client (no hand-over to the main thread, no wake-up of it).
// The answers go in the order of the requests, whichever route answers first. Shared: the socket
// stays open while a route still holds an answer for it, whoever drops the client first.
class Outbox {
 public:
  explicit Outbox(io::FileDescriptor socket) : socket_(std::move(socket)) {}
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  int fd() const { return socket_.get(); }

  // Queues the answer to request `number` after those to earlier requests, and writes what can go
  // without blocking. Returns whether bytes are left to write once the socket takes them.
  bool deliver(std::uint64_t number, std::string answer) {
    const std::lock_guard lock(mutex_);
    answered_early_.emplace(number, std::move(answer));
    for (auto next = answered_early_.find(answered_); next != answered_early_.end();
         next = answered_early_.find(++answered_)) {
      to_send_ += framed(next->second);
      answered_early_.erase(next);
    }
    return write_what_goes();
  }
  // Writes what can go without blocking; whether bytes are left.
  bool flush() {
    const std::lock_guard lock(mutex_);
    return write_what_goes();
  }
  bool waiting_to_send() {
    const std::lock_guard lock(mutex_);
    return !to_send_.empty();
  }
  // Whether a write found the client gone.
  bool gone() {
    const std::lock_guard lock(mutex_);
    return gone_;
  }

 private:
  bool write_what_goes() {
    while (!to_send_.empty()) {
      const ssize_t sent = io::retry_on_eintr([&] {
        return ::send(socket_.get(), to_send_.data(), to_send_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      });
      if (sent < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
        gone_ = true;
        to_send_.clear();
        return false;
      }
      to_send_.erase(0, static_cast<std::size_t>(sent));
    }
    return false;
  }

  const io::FileDescriptor socket_;
  std::mutex mutex_;
  std::string to_send_;
  bool gone_ = false;
  std::uint64_t answered_ = 0;
  std::map<std::uint64_t, std::string> answered_early_;
};

// A client as the main thread reads it: its requests are numbered as they come.
struct Client {
  std::shared_ptr<Outbox> outbox;
  std::string received{};
  bool closed = false;
  std::uint64_t requests = 0;
};

// A request, and then its answer, with whom it is for.
struct Job {
  std::shared_ptr<Outbox> client;
  std::uint64_t number;
  std::string text;
  // Whether it keeps the agent from ending when idle: not a request of a form no store reads
  // (a client of another version, which goes direct), so that an agent that only such clients
  // call still ends, and the next client starts one of its own version.
  bool keeps_alive;
};

io::FileDescriptor make_event() {
  io::FileDescriptor fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) io::throw_errno("eventfd");
  return fd;
}

void raise_event(int event) {
  const std::uint64_t one = 1;
  // Only EAGAIN can fail it: the counter is full, so the event is raised already.
  [[maybe_unused]] const ssize_t written =
      io::retry_on_eintr([&] { return ::write(event, &one, sizeof one); });
}

void clear_event(int event) {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t read =
      io::retry_on_eintr([&] { return ::read(event, &count, sizeof count); });
}

// What the routes tell the main thread without waking it, and the event that wakes it when an
// answer could not all be written (the main thread then waits for the client's socket).
struct RouteNews {
  std::atomic<std::size_t> in_flight{0};
  // When the last answer that keeps the agent alive was written (monotonic_now(), in ns).
  std::atomic<nanoseconds::rep> last_answered{0};
  io::FileDescriptor answers_waiting = make_event();
};

// The requests of one route, answered in turn on a thread of its own with stores of its own, so
// that a store that hangs holds up the requests of its route alone.
class Route {
 public:
  Route(const std::string& state_dir, RouteNews& news)
      : work_came_(make_event()),
        worker_(io::run_in_background(
            [this, state_dir, &news](io::Waiter& waiter) { serve(waiter, state_dir, news); })) {}
  Route(const Route&) = delete;
  Route& operator=(const Route&) = delete;

  // Only a job that finds the queue empty tells the worker: the worker takes the whole queue at
  // once, so one that joins a queue already told of is taken with it (a write fewer per request
  // while a round trip is in flight).
  void queue(Job job) {
    bool first = false;
    {
      const std::lock_guard lock(mutex_);
      first = queued_.empty();
      queued_.push_back(std::move(job));
    }
    if (first) raise_event(work_came_.get());
  }
  std::size_t connections() {
    const std::lock_guard lock(mutex_);
    return connections_;
  }
  std::uint64_t decisions() {
    const std::lock_guard lock(mutex_);
    return decisions_;
  }

 private:
  // The worker: until the route is dropped, answers what was queued meanwhile, all at once (a
  // batch: requests for one key that came during a round trip go out together), and writes the
  // answers to their clients.
  void serve(io::Waiter& waiter, const std::string& state_dir, RouteNews& news) {
    const std::unique_ptr<stores::AgentStores> stores = stores::open_agent_stores(state_dir);
    pollfd work{.fd = work_came_.get(), .events = POLLIN, .revents = 0};
    while (waiter.wait_until(nanoseconds::max(), {&work, 1}) == 0) {
      clear_event(work_came_.get());
      std::vector<Job> jobs;
      {
        const std::lock_guard lock(mutex_);
        jobs.swap(queued_);
      }
      if (jobs.empty()) continue;
      std::vector<std::string> requests;
      for (Job& job : jobs) requests.push_back(std::move(job.text));
      // A caller whose deadline comes while others of the batch are still waited for is answered
      // then.
      std::vector<bool> answered(jobs.size());
      std::vector<std::string> answers =
          stores->answer(requests, waiter, [&](std::size_t i, std::string answer) {
            answered[i] = true;
            deliver(jobs[i], std::move(answer), news);
          });
      {
        const std::lock_guard lock(mutex_);
        connections_ = stores->connections();
        decisions_ = stores->decisions();
      }
      for (std::size_t i = 0; i < jobs.size(); ++i)
        if (!answered[i]) deliver(jobs[i], std::move(answers[i]), news);
    }
  }

  // Writes `answer` to the job's client, and tells the main thread.
  static void deliver(const Job& job, std::string answer, RouteNews& news) {
    const bool left_waiting = job.client->deliver(job.number, std::move(answer));
    if (job.keeps_alive) news.last_answered = io::monotonic_now().count();
    --news.in_flight;
    if (left_waiting) raise_event(news.answers_waiting.get());
  }

  io::FileDescriptor work_came_;
  std::mutex mutex_;
  std::vector<Job> queued_;
  std::size_t connections_ = 0;
  std::uint64_t decisions_ = 0;
  // Last: stopped (its waits end as if SIGTERM had come) and joined before the rest goes.
  std::unique_ptr<io::BackgroundTask> worker_;
};

// The listening socket at `path`, this user's alone: made under umask 077 and then 0600.
io::FileDescriptor listen_at(const std::string& path) {
  io::FileDescriptor fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) io::throw_errno("socket");
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) throw std::length_error("socket path too long");
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  ::unlink(path.c_str());
  const mode_t previous = ::umask(077);
  const int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
  ::umask(previous);
  if (bound != 0) io::throw_errno("bind " + path);
  if (::chmod(path.c_str(), 0600) != 0) io::throw_errno("chmod " + path);
  if (::listen(fd.get(), SOMAXCONN) != 0) io::throw_errno("listen " + path);
  return fd;
}

// Reads what came on `client`; returns the whole requests among it, in order. A read that does
// not fill the chunk took all there was: what comes later makes the socket readable again (the
// wait is level-triggered), so no read is spent on learning that nothing more is there.
std::vector<std::string> receive(Client& client) {
  std::array<char, 16384> chunk;
  while (true) {
    const ssize_t received = io::retry_on_eintr(
        [&] { return ::recv(client.outbox->fd(), chunk.data(), chunk.size(), MSG_DONTWAIT); });
    if (received > 0) {
      client.received.append(chunk.data(), static_cast<std::size_t>(received));
      if (static_cast<std::size_t>(received) < chunk.size()) break;
      continue;
    }
    if (received == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) client.closed = true;
    break;
  }
  std::vector<std::string> requests;
  try {
    while (auto request = take_frame(client.received)) requests.push_back(std::move(*request));
  } catch (const std::length_error&) {
    client.closed = true;
  }
  return requests;
}

// The agent's clients and routes, served from its main thread.
class Agent {
 public:
  Agent(std::string state_dir, int listening)
      : state_dir_(std::move(state_dir)), listening_(listening) {}

  // Serves until a stop signal comes, or until nothing has come for `idle`, no request is being
  // answered and nothing waits to be read or written.
  void run(nanoseconds idle, const sigset_t* waiting_mask) {
    nanoseconds last_activity = io::monotonic_now();
    while (stop_signal == 0) {
      // The routes answer without waking this thread: the idle time counts from their last
      // answer, and is put off while a request is being answered.
      last_activity = std::max(last_activity, nanoseconds(news_.last_answered.load()));
      bool ends_if_quiet = false;
      if (const nanoseconds now = io::monotonic_now(); now >= last_activity + idle) {
        ends_if_quiet = news_.in_flight == 0;
        if (!ends_if_quiet) last_activity = now;
      }
      std::vector<pollfd> ready{
          {.fd = listening_, .events = POLLIN, .revents = 0},
          {.fd = news_.answers_waiting.get(), .events = POLLIN, .revents = 0}};
      for (const auto& [id, client] : clients_)
        ready.push_back({.fd = client.outbox->fd(),
                         .events = static_cast<short>(
                             POLLIN | (client.outbox->waiting_to_send() ? POLLOUT : 0)),
                         .revents = 0});
      timespec storage{};
      // Idle: one look without waiting, so that a client that came meanwhile (connected, or its
      // request sent) is served, not dropped.
      const int became_ready =
          ::ppoll(ready.data(), ready.size(),
                  io::time_left_for_ppoll(
                      ends_if_quiet ? nanoseconds::zero() : last_activity + idle, storage),
                  waiting_mask);
      if (became_ready < 0) {
        if (errno == EINTR) continue;
        io::throw_errno("ppoll");
      }
      if (became_ready == 0 && ends_if_quiet) break;
      bool active = false;
      auto entry = ready.begin() + 2;
      for (auto& [id, client] : clients_) {
        const short events = (entry++)->revents;
        if (events & POLLOUT) client.outbox->flush();
        if (events & (POLLIN | POLLHUP | POLLERR)) {
          std::vector<std::string> requests = receive(client);
          // A client that closed its end (the wait says so before a read finds it) no longer
          // waits for an answer: it gave up, or went direct. Nothing is booked for nobody.
          if (events & (POLLHUP | POLLERR)) client.closed = true;
          if (client.closed) continue;
          for (std::string& request : requests) active = take(client, std::move(request)) || active;
        }
      }
      // The sockets that an answer waits for are polled from the next turn on.
      if (ready[1].revents & POLLIN) clear_event(news_.answers_waiting.get());
      if (active) last_activity = io::monotonic_now();
      std::erase_if(clients_, [](const auto& entry) {
        return entry.second.closed || entry.second.outbox->gone();
      });
      if (ready[0].revents & POLLIN) accept_clients();
    }
  }

 private:
  void accept_clients() {
    while (true) {
      io::FileDescriptor fd(io::retry_on_eintr(
          [&] { return ::accept4(listening_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK); }));
      if (!fd) return;
      ucred peer{};
      socklen_t size = sizeof peer;
      // Another user's process never gets an answer, even if the socket's mode let it in.
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 ||
          peer.uid != ::geteuid())
        continue;
      clients_.emplace(next_client_++, Client{.outbox = std::make_shared<Outbox>(std::move(fd))});
    }
  }

  // The agent's own request is answered at once, the stores' are queued on their route. Returns
  // whether the request keeps the agent alive (Job::keeps_alive).
  bool take(Client& client, std::string request) {
    const std::uint64_t number = client.requests++;
    if (request == kStatusRequest) {
      client.outbox->deliver(number, status());
      return true;
    }
    const std::string route_name = stores::agent_route(request);
    std::unique_ptr<Route>& route = routes_[route_name];
    if (!route) route = std::make_unique<Route>(state_dir_, news_);
    ++news_.in_flight;
    route->queue({.client = client.outbox,
                  .number = number,
                  .text = std::move(request),
                  .keeps_alive = !route_name.empty()});
    return !route_name.empty();
  }

  std::string status() {
    std::size_t connections = 0;
    std::uint64_t decisions = 0;
    for (auto& [name, route] : routes_) {
      connections += route->connections();
      decisions += route->decisions();
    }
    return std::to_string(::getpid()) + " " + std::to_string(connections) + " " +
           std::to_string(decisions);
  }

  std::string state_dir_;
  int listening_;
  std::map<std::uint64_t, Client> clients_;
  std::uint64_t next_client_ = 0;
  // Before the routes: their workers tell it until they are joined.
  RouteNews news_;
  std::map<std::string, std::unique_ptr<Route>, std::less<>> routes_;
};

}  // namespace

void run_agent(const std::string& state_dir, nanoseconds idle) {
  // Holds no mount busy while it idles.
  if (::chdir("/") != 0) io::throw_errno("chdir /");
  const state::StateDirectory directory = state::StateDirectory::open(state_dir);
  // A client starts an agent when it finds no socket: the agent before may be ending (its socket
  // removed, its lock released as it exits), and is waited for a moment. Still held after it,
  // the lock is another agent's that serves the directory: its clients found it meanwhile.
  io::FileDescriptor lock = directory.try_lock(std::string(kLockName));
  for (int tries = 0; !lock && tries < kLockTries; ++tries) {
    ::usleep(kLockPause.count());
    lock = directory.try_lock(std::string(kLockName));
  }
  if (!lock) return;
  const std::string pid = std::to_string(::getpid()) + "\n";
  io::rewrite_from_start(lock, pid, 64);
  const std::string path = state_dir + "/" + std::string(kSocketName);
  const AgentSignals signals;
  const io::FileDescriptor listening = listen_at(path);
  Agent(state_dir, listening.get()).run(idle, signals.waiting_mask());
  // Still holding the lock: the socket is this agent's, never a newer one's.
  ::unlink(path.c_str());
}

}  // namespace ratelimit::agent
