#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <list>
#include <memory>
#include <vector>

#include "agent/agent.hpp"
#include "agent/agent_protocol.hpp"
#include "backends/open_backend.hpp"
#include "state/state_directory.hpp"

namespace ratelimit::agent {
namespace {

using std::chrono::nanoseconds;

volatile sig_atomic_t stop_signal = 0;

void record_stop(int signal) { stop_signal = signal; }

// While alive, SIGTERM, SIGINT and SIGHUP are blocked but for the one ppoll wait of the loop,
// where their handler only records them; SIGPIPE is ignored (a client gone is an error return).
class AgentSignals {
 public:
  AgentSignals() {
    sigemptyset(&stops_);
    struct sigaction action {};
    action.sa_handler = record_stop;
    sigemptyset(&action.sa_mask);
    for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
      sigaddset(&stops_, signal);
      ::sigaction(signal, &action, nullptr);
    }
    ::signal(SIGPIPE, SIG_IGN);
    ::sigprocmask(SIG_BLOCK, &stops_, &waiting_mask_);
    for (const int signal : {SIGTERM, SIGINT, SIGHUP}) sigdelset(&waiting_mask_, signal);
  }
  const sigset_t* waiting_mask() const { return &waiting_mask_; }

 private:
  sigset_t stops_;
  sigset_t waiting_mask_;
};

struct Client {
  io::FileDescriptor socket;
  std::string received{};
  std::string to_send{};
  bool closed = false;
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

void accept_clients(int listening, std::list<Client>& clients) {
  while (true) {
    io::FileDescriptor fd(io::retry_on_eintr(
        [&] { return ::accept4(listening, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK); }));
    if (!fd) return;
    ucred peer{};
    socklen_t size = sizeof peer;
    // Another user's process never gets an answer, even if the socket's mode let it in.
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 ||
        peer.uid != ::geteuid())
      continue;
    clients.push_back({.socket = std::move(fd)});
  }
}

void flush(Client& client) {
  while (!client.to_send.empty()) {
    const ssize_t sent = io::retry_on_eintr([&] {
      return ::send(client.socket.get(), client.to_send.data(), client.to_send.size(),
                    MSG_NOSIGNAL | MSG_DONTWAIT);
    });
    if (sent < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) client.closed = true;
      return;
    }
    client.to_send.erase(0, static_cast<std::size_t>(sent));
  }
}

// Reads what came on `client`; the whole requests among it are added to `requests`, in order.
void receive(Client& client, std::vector<std::pair<Client*, std::string>>& requests) {
  std::array<char, 16384> chunk;
  while (true) {
    const ssize_t received = io::retry_on_eintr(
        [&] { return ::recv(client.socket.get(), chunk.data(), chunk.size(), MSG_DONTWAIT); });
    if (received > 0) {
      client.received.append(chunk.data(), static_cast<std::size_t>(received));
      continue;
    }
    if (received == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) client.closed = true;
    break;
  }
  try {
    while (auto request = take_frame(client.received)) requests.emplace_back(&client, *request);
  } catch (const std::length_error&) {
    client.closed = true;
  }
}

// Answers the requests that came together, the stores' in one batch (so that those for one
// deployment go out in one write), and queues each answer for its client.
void answer(std::vector<std::pair<Client*, std::string>>& requests, backends::AgentStores& stores) {
  std::vector<std::string> to_stores;
  for (auto& [client, request] : requests) {
    if (request != kStatusRequest) to_stores.push_back(request);
  }
  const std::vector<std::string> answers = stores.answer(to_stores);
  auto store_answer = answers.begin();
  for (auto& [client, request] : requests) {
    client->to_send +=
        framed(request == kStatusRequest
                   ? std::to_string(::getpid()) + " " + std::to_string(stores.connections()) + " " +
                         std::to_string(stores.decisions())
                   : *store_answer++);
  }
}

}  // namespace

void run_agent(const std::string& state_dir, nanoseconds idle) {
  // Holds no mount busy while it idles.
  if (::chdir("/") != 0) io::throw_errno("chdir /");
  const state::StateDirectory directory = state::StateDirectory::open(state_dir);
  const io::FileDescriptor lock = directory.try_lock(std::string(kLockName));
  if (!lock) return;  // another agent serves the directory: its clients found it meanwhile
  const std::string pid = std::to_string(::getpid()) + "\n";
  io::rewrite_from_start(lock, pid, 64);
  const std::string path = state_dir + "/" + std::string(kSocketName);
  const AgentSignals signals;
  const io::FileDescriptor listening = listen_at(path);
  const std::unique_ptr<backends::AgentStores> stores = backends::open_agent_stores();
  std::list<Client> clients;
  nanoseconds last_request = io::monotonic_now();
  while (stop_signal == 0) {
    const nanoseconds until_idle = last_request + idle;
    if (io::monotonic_now() >= until_idle) break;
    std::vector<pollfd> ready{{.fd = listening.get(), .events = POLLIN, .revents = 0}};
    for (const Client& client : clients)
      ready.push_back(
          {.fd = client.socket.get(),
           .events = static_cast<short>(POLLIN | (client.to_send.empty() ? 0 : POLLOUT)),
           .revents = 0});
    timespec storage{};
    if (::ppoll(ready.data(), ready.size(), io::time_left_for_ppoll(until_idle, storage),
                signals.waiting_mask()) < 0) {
      if (errno == EINTR) continue;
      io::throw_errno("ppoll");
    }
    std::vector<std::pair<Client*, std::string>> requests;
    auto entry = ready.begin() + 1;
    for (Client& client : clients) {
      const short events = (entry++)->revents;
      if (events & POLLOUT) flush(client);
      if (events & (POLLIN | POLLHUP | POLLERR)) receive(client, requests);
    }
    if (!requests.empty()) {
      answer(requests, *stores);
      for (Client& client : clients) flush(client);
      last_request = io::monotonic_now();
    }
    clients.remove_if([](const Client& client) { return client.closed; });
    if (ready[0].revents & POLLIN) accept_clients(listening.get(), clients);
  }
  // Still holding the lock: the socket is this agent's, never a newer one's.
  ::unlink(path.c_str());
}

}  // namespace ratelimit::agent
