#include "state/state_directory.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "temp_dir.hpp"

namespace ratelimit::state {
namespace {

using testing::TempDir;

TEST(StateDirectoryShared, ReplacesWholeWithAPrivateFileAndLeavesNothingElse) {
  const TempDir dir;
  const StateDirectory directory = StateDirectory::open(dir.string());
  directory.replace_shared("secret", "first");
  directory.replace_shared("secret", "second");
  EXPECT_EQ(directory.read_private("secret", 100), "second");
  struct stat status {};
  ASSERT_EQ(::stat((dir.path() / "secret").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0600U);
  EXPECT_EQ(directory.file_names(), (std::vector<std::string>{".", "..", "secret"}));
}

TEST(StateDirectoryShared, AbandonedNewFilesOfDeadProcessesAreRemoved) {
  const TempDir dir;
  const StateDirectory directory = StateDirectory::open(dir.string());
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead = std::to_string(child);
  const std::string alive = std::to_string(::getpid());
  for (const std::string& name : std::vector<std::string>{
           "s.a." + dead + "-0.new", "s.a." + dead + "-17.new", "s.a." + alive + "-0.new", "s.a",
           "other." + dead + "-0.new", "s.a.x" + dead + "-0.new", "s.a." + dead + "-0.new.x"})
    std::ofstream(dir.path() / name) << "x";
  directory.remove_abandoned_shared("s.");
  std::vector<std::string> kept{".",
                                "..",
                                "other." + dead + "-0.new",
                                "s.a." + alive + "-0.new",
                                "s.a",
                                "s.a." + dead + "-0.new.x",
                                "s.a.x" + dead + "-0.new"};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(directory.file_names(), kept);
}

TEST(StateDirectoryShared, ReadPrivateRefusesWhatOthersMayReadOrWrite) {
  const TempDir dir;
  const StateDirectory directory = StateDirectory::open(dir.string());
  EXPECT_EQ(directory.read_private("missing", 100), std::nullopt);
  std::ofstream(dir.path() / "open") << "readable";
  for (const auto mode : {0644, 0640, 0604, 0602}) {
    std::filesystem::permissions(dir.path() / "open", static_cast<std::filesystem::perms>(mode));
    EXPECT_EQ(directory.read_private("open", 100), std::nullopt) << mode;
    EXPECT_EQ(directory.read_regular("open", 100), "readable");
  }
  std::filesystem::permissions(dir.path() / "open", std::filesystem::perms(0600));
  EXPECT_EQ(directory.read_private("open", 100), "readable");
  std::filesystem::create_symlink(dir.path() / "open", dir.path() / "link");
  EXPECT_EQ(directory.read_private("link", 100), std::nullopt);
}

TEST(StateDir, FirstOfOptionEnvironmentAndPrivatePlaces) {
  const PrivatePlaces places{
      .uid = 7, .runtime_dir = "/run/user/7", .state_home = "/home/u/.local/state"};
  EXPECT_EQ(choose_state_dir("/opt", "/env", "/xdg/7", places), "/opt");
  EXPECT_EQ(choose_state_dir("", "/env", "/xdg/7", places), "/env");
  EXPECT_EQ(choose_state_dir("", "", "/xdg/7", places), "/xdg/7/ratelimit");
  // Without XDG_RUNTIME_DIR (cron, su): a place no other user can take first.
  EXPECT_EQ(choose_state_dir("", "", "", places), "/run/user/7/ratelimit");
  EXPECT_EQ(choose_state_dir("", "", "", {.uid = 7, .runtime_dir = "", .state_home = "/s"}),
            "/s/ratelimit");
  // No home of one's own either (nobody): the shared /tmp is all that is left.
  EXPECT_EQ(choose_state_dir("", "", "", {.uid = 7, .runtime_dir = "", .state_home = ""}),
            "/tmp/ratelimit-7");
}

}  // namespace
}  // namespace ratelimit::state
