#include "agent/agent_protocol.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

namespace ratelimit::agent {
namespace {

TEST(AgentProtocol, FramesComeOutWholeAndInOrder) {
  std::string buffer = framed("first") + framed("") + framed(std::string(1000, '\0'));
  EXPECT_EQ(take_frame(buffer), "first");
  EXPECT_EQ(take_frame(buffer), "");
  EXPECT_EQ(take_frame(buffer), std::string(1000, '\0'));
  EXPECT_EQ(take_frame(buffer), std::nullopt);
  EXPECT_TRUE(buffer.empty());
}

// A frame that has not all come is left where it is until the rest comes.
TEST(AgentProtocol, APartOfAFrameWaitsForTheRest) {
  const std::string frame = framed("hello");
  for (std::size_t part = 0; part < frame.size(); ++part) {
    std::string buffer = frame.substr(0, part);
    EXPECT_EQ(take_frame(buffer), std::nullopt) << part;
    EXPECT_EQ(buffer, frame.substr(0, part));
    buffer += frame.substr(part);
    EXPECT_EQ(take_frame(buffer), "hello") << part;
  }
}

TEST(AgentProtocol, AFrameLargerThanAnyClientsIsRefused) {
  const std::uint32_t length = kMaxFrame + 1;
  std::string buffer(sizeof length, '\0');
  std::memcpy(buffer.data(), &length, sizeof length);
  EXPECT_THROW(take_frame(buffer), std::length_error);
  std::string largest = framed(std::string(kMaxFrame, 'x'));
  EXPECT_EQ(take_frame(largest)->size(), kMaxFrame);
}

}  // namespace
}  // namespace ratelimit::agent
