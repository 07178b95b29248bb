#include "state/state_directory.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "temp_dir.hpp"

namespace ratelimit::backends {
namespace {

using testing::TempDir;

TEST(StateDirectoryShared, ReplacesWholeWithAPrivateFileAndLeavesNothingElse) {
  const TempDir dir;
  const state::StateDirectory directory = state::StateDirectory::open(dir.string());
  directory.replace_shared("secret", "first");
  directory.replace_shared("secret", "second");
  EXPECT_EQ(directory.read_private("secret", 100), "second");
  struct stat status {};
  ASSERT_EQ(::stat((dir.path() / "secret").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0600U);
  EXPECT_EQ(directory.file_names(), (std::vector<std::string>{".", "..", "secret"}));
}

TEST(StateDirectoryShared, ReadPrivateRefusesWhatOthersMayReadOrWrite) {
  const TempDir dir;
  const state::StateDirectory directory = state::StateDirectory::open(dir.string());
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

}  // namespace
}  // namespace ratelimit::backends
