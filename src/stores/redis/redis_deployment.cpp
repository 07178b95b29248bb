#include "stores/redis/redis_deployment.hpp"

#include "errors.hpp"

namespace ratelimit::stores::redis {
namespace {

constexpr std::string_view kSentinelScheme = "redis-sentinel://";
constexpr std::string_view kTcpScheme = "redis://";
constexpr int kSentinelPort = 26379;

[[noreturn]] void reject(const std::string& shown, std::string_view why) {
  throw UsageError("bad Redis URL '" + shown + "': " + std::string(why));
}

// `part` read as the tail of a redis:// URL, with its errors naming the whole URL `shown`.
Address parse_part(const std::string& part, const std::string& shown) {
  return parse_url(Url(std::string(kTcpScheme) + part, shown));
}

bool names_a_port(std::string_view host_port) {
  if (host_port.starts_with('[')) return host_port.find("]:") != std::string_view::npos;
  return host_port.find(':') != std::string_view::npos;
}

Deployment parse_sentinel_url(const Url& url) {
  Deployment deployment{.kind = Deployment::Kind::sentinel,
                        .node = {},
                        .sentinels = {},
                        .master_name = {},
                        .shown = url.shown};
  const std::string& shown = deployment.shown;
  std::string_view rest = std::string_view(url.written).substr(kSentinelScheme.size());
  std::string user_part;
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    user_part = std::string(rest.substr(0, at + 1));
    rest = rest.substr(at + 1);
  }
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos)
    reject(shown, "expected /MASTER_NAME after the sentinels: " + std::string(kSentinelScheme) +
                      "host:port[,host:port...]/MASTER_NAME[/db]");
  std::string_view hosts = rest.substr(0, slash);
  std::string_view path = rest.substr(slash + 1);
  const std::size_t name_end = path.find('/');
  deployment.master_name = std::string(path.substr(0, name_end));
  if (deployment.master_name.empty()) reject(shown, "no master name after the sentinels");
  // "/db", if any.
  const std::string_view database =
      name_end == std::string_view::npos ? std::string_view() : path.substr(name_end);
  // The master's credentials and database; its host comes from the sentinels.
  deployment.node = parse_part(user_part + "master" + std::string(database), shown);
  deployment.node.shown = shown;
  while (true) {
    const std::size_t comma = hosts.find(',');
    const std::string_view host_port = hosts.substr(0, comma);
    if (host_port.empty()) reject(shown, "an empty sentinel address");
    Address sentinel = parse_part(std::string(host_port), shown);
    if (!names_a_port(host_port)) sentinel.port = kSentinelPort;
    sentinel.shown = std::string(kSentinelScheme) + std::string(host_port);
    deployment.sentinels.push_back(std::move(sentinel));
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  return deployment;
}

}  // namespace

Deployment parse_deployment(const Url& url) {
  if (url.written.starts_with(kSentinelScheme)) return parse_sentinel_url(url);
  Address node = parse_url(url);
  std::string shown = node.shown;
  return {.kind = Deployment::Kind::server,
          .node = std::move(node),
          .sentinels = {},
          .master_name = {},
          .shown = std::move(shown)};
}

Address node_address(const Address& credentials, const std::string& host, int port) {
  Address node = credentials;
  node.kind = Address::Kind::tcp;
  node.host = host;
  node.port = port;
  node.socket_path.clear();
  const bool ipv6 = host.find(':') != std::string::npos;
  node.shown =
      std::string(kTcpScheme) + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  return node;
}

}  // namespace ratelimit::stores::redis
