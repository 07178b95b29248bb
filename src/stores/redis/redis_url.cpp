#include "stores/redis/redis_url.hpp"

#include <charconv>
#include <optional>
#include <utility>

#include "errors.hpp"

namespace ratelimit::stores::redis {
namespace {

constexpr std::string_view kTcpScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";
constexpr std::string_view kUnixScheme = "unix://";
constexpr std::string_view kHidden = "***";

// The user part of a URL (between the scheme and the last '@'), if any: [begin, end) in `url`.
struct UserPart {
  std::size_t begin = 0;
  std::size_t end = 0;
};

std::optional<UserPart> find_user_part(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  const std::size_t at = url.rfind('@');
  if (at == std::string_view::npos || at < scheme_end + 3) return std::nullopt;
  return UserPart{scheme_end + 3, at};
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX; nullopt if a '%' is not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view text) {
  std::string decoded;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      decoded += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex_digit(text[i + 1]);
    const int low = hex_digit(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    decoded += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return decoded;
}

std::optional<int> whole_number(std::string_view text, int low, int high) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < low ||
      value > high)
    return std::nullopt;
  return value;
}

class UrlParser {
 public:
  UrlParser(std::string_view url, std::string shown) : url_(url) {
    address_.shown = std::move(shown);
  }

  Address parse() {
    std::string_view rest;
    if (url_.starts_with(kTcpScheme)) {
      address_.kind = Address::Kind::tcp;
      rest = url_.substr(kTcpScheme.size());
    } else if (url_.starts_with(kUnixScheme)) {
      address_.kind = Address::Kind::unix_socket;
      rest = url_.substr(kUnixScheme.size());
    } else if (url_.starts_with(kTlsScheme)) {
      address_.kind = Address::Kind::tcp;
      address_.tls = true;
      rest = url_.substr(kTlsScheme.size());
    } else {
      reject("expected redis[s]://[[user]:password@]host[:port][/db] or unix:///path[?db=N]");
    }
    if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
      parse_user_part(rest.substr(0, at));
      rest = rest.substr(at + 1);
    }
    if (address_.kind == Address::Kind::tcp)
      parse_host_port_database(rest);
    else
      parse_socket_path(rest);
    return address_;
  }

 private:
  [[noreturn]] void reject(std::string_view why) const {
    throw UsageError("bad Redis URL '" + address_.shown + "': " + std::string(why));
  }

  void parse_user_part(std::string_view user_part) {
    const std::size_t colon = user_part.find(':');
    if (colon == std::string_view::npos) reject("a user needs a password: [user]:password@");
    const auto user = percent_decode(user_part.substr(0, colon));
    const auto password = percent_decode(user_part.substr(colon + 1));
    if (!user || !password) reject("a '%' in the user or password is not followed by 2 hex digits");
    if (password->empty()) reject("empty password");
    address_.user = *user;
    address_.password = *password;
  }

  void parse_host_port_database(std::string_view rest) {
    std::string_view authority = rest;
    if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
      authority = rest.substr(0, slash);
      const auto database = whole_number(rest.substr(slash + 1), 0, 1 << 30);
      if (!database) reject("the database after '/' must be a number");
      address_.database = *database;
    }
    std::string_view port;
    if (authority.starts_with('[')) {
      const std::size_t close = authority.find(']');
      if (close == std::string_view::npos) reject("no ']' after an IPv6 address");
      address_.host = authority.substr(1, close - 1);
      const std::string_view after = authority.substr(close + 1);
      if (!after.empty() && !after.starts_with(':')) reject("expected ':port' after ']'");
      if (!after.empty()) port = after.substr(1);
      if (after == ":") reject("empty port");
    } else {
      const std::size_t colon = authority.find(':');
      address_.host = authority.substr(0, colon);
      if (colon != std::string_view::npos) {
        port = authority.substr(colon + 1);
        if (port.empty()) reject("empty port");
      }
    }
    if (address_.host.empty()) reject("no host");
    if (!port.empty()) {
      const auto number = whole_number(port, 1, 65535);
      if (!number) reject("the port must be a number from 1 to 65535");
      address_.port = *number;
    }
  }

  void parse_socket_path(std::string_view rest) {
    std::string_view path = rest;
    if (const std::size_t question = rest.find('?'); question != std::string_view::npos) {
      path = rest.substr(0, question);
      const std::string_view query = rest.substr(question + 1);
      if (!query.starts_with("db=")) reject("the only query parameter is db=N");
      const auto database = whole_number(query.substr(3), 0, 1 << 30);
      if (!database) reject("db= must be a number");
      address_.database = *database;
    }
    if (!path.starts_with('/')) reject("the socket path must be absolute: unix:///path");
    address_.socket_path = path;
  }

  std::string_view url_;
  Address address_;
};

// `url` with the password of its user part, if any, replaced by kHidden (the whole user part
// when it is malformed).
std::string hide_password(std::string_view url) {
  const auto user_part = find_user_part(url);
  if (!user_part) return std::string(url);
  const std::string_view user = url.substr(user_part->begin, user_part->end - user_part->begin);
  const std::size_t colon = user.find(':');
  // Without a colon the whole part may be a password written without its ':'.
  const std::size_t hidden_from =
      colon == std::string_view::npos ? user_part->begin : user_part->begin + colon + 1;
  return std::string(url.substr(0, hidden_from)) + std::string(kHidden) +
         std::string(url.substr(user_part->end));
}

}  // namespace

Url::Url(std::string written) : written(std::move(written)) {
  shown = hide_password(this->written);
}

Address parse_url(const Url& url) { return UrlParser(url.written, url.shown).parse(); }

std::string explain_refusal(const std::string& error) {
  if (error.starts_with("NOAUTH") ||
      error.find("Protocol error: unauthenticated") != std::string::npos)
    return "the server needs a password: give it in the URL, as redis://:PASSWORD@host or "
           "unix://:PASSWORD@/path (USER:PASSWORD for an ACL user)";
  // Before 7.0 a server has no functions, the form the bucket script is loaded in.
  if (error.starts_with("ERR unknown command 'FCALL'") ||
      error.starts_with("ERR unknown command 'FUNCTION'"))
    return "the server has no Redis functions (FCALL): ratelimit needs Redis 7.0 or later";
  return error;
}

}  // namespace ratelimit::stores::redis
