#include "base/identity.h"

#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(IdentityTest, LooksUpUsersByName) {
  absl::StatusOr<UnixIdentity> root = LookUpUser("root");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->uid, 0u);
  EXPECT_EQ(root->gid, 0u);
  absl::StatusOr<UnixIdentity> unknown = LookUpUser("no-such-user-gpucmd");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("no-such-user-gpucmd"), std::string::npos);
}

TEST(IdentityTest, ADroppedIdentityCannotBeRegained) {
  if (geteuid() != 0) GTEST_SKIP() << "only root can change its identity";
  absl::StatusOr<UnixIdentity> nobody = LookUpUser("nobody");
  ASSERT_TRUE(nobody.ok()) << nobody.status();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (DropIdentity(*nobody) != 0) _exit(1);
    if (getuid() != nobody->uid || geteuid() != nobody->uid) _exit(2);
    if (getgid() != nobody->gid || getgroups(0, nullptr) != 0) _exit(3);
    if (setuid(0) == 0 || setgid(0) == 0) _exit(4);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace gpucmd
