#include "stores/redis/redis_options.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <vector>

#include "errors.hpp"
#include "format/words.hpp"

namespace ratelimit::stores::redis {
namespace {

// An option of a timeout, at least a millisecond, kept in `timeout`.
StoreOption<Options> timeout_option(std::string_view name, std::string_view help,
                                    std::chrono::milliseconds Settings::*timeout) {
  return {
      {.name = name,
       .kind = OptionKind::duration,
       .value_name = "DURATION",
       .value_said = "a DURATION",
       .help = help},
      [timeout](Options& options, const GivenValue& value) {
        if (value.duration < std::chrono::milliseconds(1))
          throw UsageError(fmt::format("invalid duration '{}': must be at least 1ms", value.text));
        options.settings.*timeout = std::chrono::ceil<std::chrono::milliseconds>(value.duration);
      }};
}

// --on-redis-error's words, and the prefix of local's share.
const std::vector<std::string> kPolicyWords = {"fail", "allow", "local"};
constexpr OnUnavailable kPolicyActions[] = {OnUnavailable::fail, OnUnavailable::allow,
                                            OnUnavailable::local};
constexpr std::string_view kLocalShare = "local:";

// fail, allow, local, or local:N% (this host's bucket at N% of the key's rate, 0 < N <= 100), in
// any case.
UnavailablePolicy policy_of(std::string_view text) {
  std::string word(text);
  std::transform(word.begin(), word.end(), word.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string said_as = fmt::format("{}={}", kOnErrorOption, word);
  if (word.starts_with(kLocalShare)) {
    const std::string_view percent = std::string_view(word).substr(kLocalShare.size());
    double share = 0.0;
    const auto [end, error] =
        std::from_chars(percent.data(), percent.data() + percent.size(), share);
    if (error != std::errc() || std::string_view(end) != "%" || !(share > 0.0) || share > 100.0)
      throw UsageError(
          fmt::format("invalid value '{}': expected local:N% with N above 0 and at "
                      "most 100 (this host's share of the key's rate), e.g. local:25%",
                      text));
    return {.action = OnUnavailable::local, .local_share = share / 100.0, .said_as = said_as};
  }
  for (std::size_t i = 0; i < kPolicyWords.size(); ++i) {
    if (word == kPolicyWords[i])
      return {.action = kPolicyActions[i], .local_share = 1.0, .said_as = said_as};
  }
  throw UsageError(format::not_one_of(text, kPolicyWords));
}

const StoreOption<Options> kOptions[] = {
    {{.name = kUrlOption,
      .value_name = "URL",
      .value_said = "a URL",
      .help = "Keep the buckets in Redis, shared by every host: redis[s]://[[user]:password@]"
              "host[:port][/db] (rediss: TLS; a server or a Cluster node), unix:///path[?db=N], "
              "or redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/MASTER[/db] "
              "[default: $RATELIMIT_REDIS]",
      .environment = kUrlVariable},
     [](Options& options, const GivenValue& value) {
       options.settings.url = Url(std::string(value.text));
     }},
    timeout_option(kTimeoutOption,
                   "Give up on Redis if an operation (connect, TLS, its commands) takes longer "
                   "[default: 1s]",
                   &Settings::timeout),
    timeout_option(kFailoverTimeoutOption,
                   "Sentinel, Cluster: wait this long for a failover (a master gone, hung or not "
                   "yet elected) before giving up on Redis [default: 60s]",
                   &Settings::failover_timeout),
    {{.name = kTlsCaOption,
      .value_name = "FILE",
      .value_said = "a FILE",
      .help = "rediss://: trust the CAs in this PEM file [default: the system's]"},
     [](Options& options, const GivenValue& value) { options.settings.tls.ca_file = value.text; }},
    {{.name = kTlsCertOption,
      .value_name = "FILE",
      .value_said = "a FILE",
      .help = "rediss://: this client's certificate (PEM), for a server that asks for one"},
     [](Options& options, const GivenValue& value) {
       options.settings.tls.cert_file = value.text;
     }},
    {{.name = kTlsKeyOption,
      .value_name = "FILE",
      .value_said = "a FILE",
      .help = "The private key of --redis-tls-cert (PEM) [default: in its file]",
      .needs = kTlsCertOption},
     [](Options& options, const GivenValue& value) { options.settings.tls.key_file = value.text; }},
    {{.name = kTlsInsecureOption,
      .kind = OptionKind::flag,
      .help = "rediss://: do not check the server's certificate and name (warns)"},
     [](Options& options, const GivenValue&) { options.settings.tls.verify = false; }},
    {{.name = kOnErrorOption,
      .value_name = "fail|allow|local[:N%]",
      .value_said = "fail, allow, local or local:N%",
      .help = "If Redis cannot answer: fail (exit 69), allow (run unthrottled) or local (use "
              "this host's bucket of the key; local:25%: at 25% of its rate), until Redis "
              "answers again",
      .for_permits = true},
     [](Options& options, const GivenValue& value) {
       options.on_unavailable = policy_of(value.text);
     }},
};

}  // namespace

std::span<const StoreOption<Options>> store_options() { return kOptions; }

void check_options(Options& options) {
  Settings& settings = options.settings;
  settings.parse_url();
  const TlsOptions& tls = settings.tls;
  if (tls.ca_file.empty() && tls.cert_file.empty() && tls.key_file.empty() && tls.verify) return;
  if (settings.url.written.empty())
    throw UsageError(fmt::format("the {} options need a rediss:// URL ({} or ${})", kAnyTlsOption,
                                 kUrlOption, kUrlVariable));
  if (!settings.deployment.node.tls)
    throw UsageError(fmt::format("the {} options need a rediss:// URL, not '{}'", kAnyTlsOption,
                                 settings.deployment.shown));
}

}  // namespace ratelimit::stores::redis
