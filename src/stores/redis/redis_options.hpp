#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "stores/agent_link.hpp"
#include "stores/fallback_store.hpp"
#include "stores/redis/redis_settings.hpp"
#include "stores/store_option.hpp"

// The Redis store's options: typed, declared for the command line with the checks that read them,
// and named from here in the store's messages.
namespace ratelimit::stores::redis {

struct Options {
  // The URL, TLS files and timeouts: what the store, its topology and the relay are made with.
  Settings settings;
  // What to do while Redis cannot answer.
  UnavailablePolicy on_unavailable;
  // The host agent, which keeps the connections for every process of the user: commands go
  // through it when it is there. None: always to the server itself.
  std::shared_ptr<AgentLink> agent{};
};

// The options' names, as the store's messages give them.
inline constexpr std::string_view kUrlOption = "--redis";
inline constexpr std::string_view kUrlVariable = "RATELIMIT_REDIS";
inline constexpr std::string_view kTimeoutOption = "--redis-timeout";
inline constexpr std::string_view kFailoverTimeoutOption = "--redis-failover-timeout";
inline constexpr std::string_view kTlsCaOption = "--redis-tls-ca";
inline constexpr std::string_view kTlsCertOption = "--redis-tls-cert";
inline constexpr std::string_view kTlsKeyOption = "--redis-tls-key";
inline constexpr std::string_view kTlsInsecureOption = "--redis-tls-insecure";
inline constexpr std::string_view kOnErrorOption = "--on-redis-error";
// All of --redis-tls-*, as one message names them.
inline constexpr std::string_view kAnyTlsOption = "--redis-tls-*";

// Every option of the store, in the order --help lists them.
std::span<const StoreOption<Options>> store_options();

// Checks what the options say together, once all are read, before the command runs: the URL
// parsed into the settings' deployment (a bad one refused even by a command that would not open
// the store); TLS options without Redis, or with a URL that is not rediss://, would go unnoticed
// (a typo'd or forgotten --redis). Throws UsageError.
void check_options(Options& options);

}  // namespace ratelimit::stores::redis
