#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

// How requests and answers travel between a client and the agent: each a frame of a 4-byte length
// (the host's byte order: both ends are on the host) and that many bytes. The agent acts on a
// request only once the whole frame has come.
namespace ratelimit::agent {

inline constexpr std::string_view kSocketName = "agent.sock";
inline constexpr std::string_view kLockName = "agent.lock";
// A request of the agent's own, not a store's: what it says of itself.
inline constexpr std::string_view kStatusRequest = "agent-status";
// The script is the largest request (FUNCTION LOAD of its library, about 90 kB); anything near
// this is no client's.
inline constexpr std::uint32_t kMaxFrame = 1 << 20;

inline std::string framed(std::string_view payload) {
  const auto length = static_cast<std::uint32_t>(payload.size());
  std::string frame(sizeof length, '\0');
  std::memcpy(frame.data(), &length, sizeof length);
  frame += payload;
  return frame;
}

// The payload of the first whole frame at the start of `buffer`, taken out of it; none while
// it has not all come. A frame too large throws std::length_error.
inline std::optional<std::string> take_frame(std::string& buffer) {
  std::uint32_t length = 0;
  if (buffer.size() < sizeof length) return std::nullopt;
  std::memcpy(&length, buffer.data(), sizeof length);
  if (length > kMaxFrame) throw std::length_error("frame too large");
  if (buffer.size() - sizeof length < length) return std::nullopt;
  std::string payload = buffer.substr(sizeof length, length);
  buffer.erase(0, sizeof length + length);
  return payload;
}

}  // namespace ratelimit::agent
