#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../unit/temp_dir.hpp"

namespace ratelimit::testing {

// How long a store in a test waits for its own server: ample on a loaded machine.
constexpr std::chrono::milliseconds kServerTimeout = std::chrono::seconds(1);

// A real redis-server of the test's own: a unix socket in a temp dir and a loopback TCP port,
// nothing saved, stopped by its pid. With `tls`, also a TLS port, its certificate for localhost
// signed by a CA made for the test (ca_file()). With `cluster`, a node of a Cluster yet to be made
// (no slots, knowing no other node). With `sentinel_of` (a server's port), a sentinel that names
// that server as the master "cache".
class RedisServer {
 public:
  explicit RedisServer(std::string password = {}, bool tls = false, bool cluster = false,
                       int sentinel_of = 0)
      : password_(std::move(password)), tls_(tls), cluster_(cluster), sentinel_of_(sentinel_of) {
    if (tls_) make_certificates();
    start();
  }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  std::string unix_url() const { return "unix://" + user_part() + (dir_.path() / "sock").string(); }
  std::string tcp_url() const {
    return "redis://" + user_part() + "127.0.0.1:" + std::to_string(port_);
  }
  std::string tls_url() const {
    return "rediss://" + user_part() + "localhost:" + std::to_string(tls_port_);
  }
  std::string ca_file() const { return (dir_.path() / "ca.crt").string(); }
  std::string socket_path() const { return (dir_.path() / "sock").string(); }
  int port() const { return port_; }
  // A Cluster node's bus, which CLUSTER MEET names.
  int cluster_port() const { return cluster_port_; }
  pid_t pid() const { return pid_; }

  // Stops the server with `signal` (SIGKILL: as a crash) and waits for it.
  void stop(int signal = SIGTERM) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // Starts it again on the same socket and port.
  void restart() {
    stop();
    start();
  }

 private:
  std::string user_part() const { return password_.empty() ? "" : ":" + password_ + "@"; }

  static int free_loopback_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      throw std::runtime_error("no free loopback port");
    ::close(fd);
    return ntohs(address.sin_port);
  }

  // ca.crt, and server.crt and server.key signed by it for localhost.
  void make_certificates() const {
    const std::string command = std::string(RATELIMIT_MAKE_TLS_FILES) + " '" + dir_.string() + "'";
    if (std::system(command.c_str()) != 0)
      throw std::runtime_error("openssl could not make the test certificates");
  }

  void start() {
    if (port_ == 0) port_ = free_loopback_port();
    if (cluster_ && cluster_port_ == 0) cluster_port_ = free_loopback_port();
    if (tls_ && tls_port_ == 0) tls_port_ = free_loopback_port();
    std::filesystem::remove(socket_path());
    std::vector<std::string> arguments{"redis-server"};
    if (sentinel_of_ != 0) {
      // The sentinel rewrites its file: one of its own, written anew at each start.
      const std::string file = (dir_.path() / "sentinel.conf").string();
      const std::string monitor =
          "sentinel monitor cache 127.0.0.1 " + std::to_string(sentinel_of_) + " 1\n";
      if (std::FILE* conf = std::fopen(file.c_str(), "w")) {
        std::fputs(monitor.c_str(), conf);
        std::fclose(conf);
      }
      arguments.push_back(file);
      arguments.push_back("--sentinel");
    }
    for (const std::string& argument : std::vector<std::string>{
             "--port", std::to_string(port_), "--bind", "127.0.0.1", "--unixsocket", socket_path(),
             "--save", "", "--appendonly", "no", "--dir", dir_.string(), "--logfile",
             (dir_.path() / "log").string()})
      arguments.push_back(argument);
    if (cluster_) {
      for (const std::string& argument :
           {std::string("--cluster-enabled"), std::string("yes"),
            std::string("--cluster-config-file"), (dir_.path() / "nodes.conf").string(),
            // Its bus on a free port of its own: the default, 10000 above, may be taken or
            // beyond 65535.
            std::string("--cluster-port"), std::to_string(cluster_port_)})
        arguments.push_back(argument);
    }
    if (!password_.empty()) {
      arguments.push_back("--requirepass");
      arguments.push_back(password_);
    }
    if (tls_) {
      for (const std::string& argument :
           {std::string("--tls-port"), std::to_string(tls_port_), std::string("--tls-cert-file"),
            (dir_.path() / "server.crt").string(), std::string("--tls-key-file"),
            (dir_.path() / "server.key").string(), std::string("--tls-ca-cert-file"), ca_file(),
            std::string("--tls-auth-clients"), std::string("no")})
        arguments.push_back(argument);
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      // Dies with the test, even one that crashed, and never holds the test's output open.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the test may block stop signals
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& argument : arguments) argv.push_back(argument.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    // Ready once it listens on both.
    for (int tries = 0; tries < 500; ++tries) {
      if (unix_listening() && tcp_listening(port_) && (!tls_ || tcp_listening(tls_port_))) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("redis-server did not start within 5 s");
  }

  bool unix_listening() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    socket_path().copy(address.sun_path, sizeof address.sun_path - 1);
    const bool connected =
        ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return connected;
  }

  static bool tcp_listening(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    const bool connected =
        ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return connected;
  }

  TempDir dir_;
  std::string password_;
  bool tls_ = false;
  bool cluster_ = false;
  int sentinel_of_ = 0;
  int cluster_port_ = 0;
  int port_ = 0;
  int tls_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace ratelimit::testing
