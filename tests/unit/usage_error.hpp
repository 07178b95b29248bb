#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "errors.hpp"
#include "thrown.hpp"

namespace ratelimit {

// The message of the UsageError that `call(arguments...)` throws; "accepted" if it throws none.
template <typename Call, typename... Arguments>
std::string usage_error_of(Call&& call, Arguments&&... arguments) {
  return message_thrown<UsageError>(std::forward<Call>(call),
                                    std::forward<Arguments>(arguments)...);
}

// A text a reader must refuse, and the one line it must say about it.
struct Refusal {
  std::string_view text;
  std::string_view message;
};

// Checks that `read` refuses every text with its own message.
template <typename Read>
void expect_refusals(Read&& read, std::initializer_list<Refusal> refusals) {
  for (const Refusal& refusal : refusals)
    EXPECT_EQ(usage_error_of(read, std::string(refusal.text)), refusal.message)
        << "reading '" << refusal.text << "'";
}

}  // namespace ratelimit
