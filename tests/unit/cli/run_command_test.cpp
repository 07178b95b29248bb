#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <system_error>

#include "cli/commands.hpp"
#include "errors.hpp"

namespace ratelimit::cli {
namespace {

template <typename Throw>
std::pair<int, std::string> run_throwing(Throw throw_it) {
  ::testing::internal::CaptureStderr();
  const int status = run_command(Command{nullptr, [&]() -> int {
                                           throw_it();
                                           return 0;
                                         }});
  return {status, ::testing::internal::GetCapturedStderr()};
}

TEST(RunCommand, EachFailureIsOneLineAndItsExitStatus) {
  using Result = std::pair<int, std::string>;
  EXPECT_EQ(run_throwing([] { throw UsageError("invalid rate 'x'"); }),
            (Result{64, "ratelimit: invalid rate 'x'\n"}));
  EXPECT_EQ(run_throwing([] { throw UnsafeStateError("unsafe"); }),
            (Result{77, "ratelimit: unsafe\n"}));
  EXPECT_EQ(run_throwing([] { throw StoreUnavailable("no store"); }),
            (Result{69, "ratelimit: no store\n"}));
  EXPECT_EQ(run_throwing([] { throw InputError(ENOENT, "in"); }),
            (Result{66, "ratelimit: in: No such file or directory\n"}));
  EXPECT_EQ(run_throwing([] { throw std::system_error(EIO, std::generic_category(), "write"); }),
            (Result{74, "ratelimit: write: Input/output error\n"}));
  EXPECT_EQ(run_throwing([] { throw CLI::RequiredError("--rate"); }),
            (Result{64, "ratelimit: --rate is required\n"}));
}

// Only the ladder gives exit statuses: a refusal the core words as std::invalid_argument is bad
// usage only where the command line hands the core its values (cli/bucket_options.cpp); one that
// gets here is a bug.
TEST(RunCommand, TheCoresInvalidArgumentIsNoUsageErrorHere) {
  EXPECT_EQ(run_throwing([] { throw std::invalid_argument("rate must be positive, got 0"); }),
            (std::pair<int, std::string>{70, "ratelimit: rate must be positive, got 0\n"}));
}

TEST(RunCommand, WhatNobodyForesawIsExit70NeverAnAbort) {
  using Result = std::pair<int, std::string>;
  EXPECT_EQ(run_throwing([] { throw std::bad_alloc(); }),
            (Result{70, "ratelimit: out of memory\n"}));
  EXPECT_EQ(run_throwing([] { throw std::logic_error("a bug"); }),
            (Result{70, "ratelimit: a bug\n"}));
  EXPECT_EQ(run_throwing([] { throw 42; }), (Result{70, "ratelimit: unexpected failure\n"}));
}

TEST(RunCommand, ReturnsTheCommandsStatus) {
  EXPECT_EQ(run_command(Command{nullptr, [] { return 75; }}), 75);
}

}  // namespace
}  // namespace ratelimit::cli
