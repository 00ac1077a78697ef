#include "base/identity.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpucmd {

absl::StatusOr<UnixIdentity> LookUpUser(const std::string& name) {
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> scratch(size > 0 ? static_cast<size_t>(size) : 16384);
  passwd entry;
  passwd* found = nullptr;
  int error = getpwnam_r(name.c_str(), &entry, scratch.data(), scratch.size(), &found);
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("no user named \"", name, "\"",
                                            error != 0 ? absl::StrCat(": ", strerror(error)) : ""));
  }
  return UnixIdentity{found->pw_uid, found->pw_gid};
}

int DropIdentity(const UnixIdentity& identity) noexcept {
  if (setgroups(0, nullptr) != 0) return errno;
  if (setresgid(identity.gid, identity.gid, identity.gid) != 0) return errno;
  if (setresuid(identity.uid, identity.uid, identity.uid) != 0) return errno;
  if (identity.uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) return EPERM;
  return 0;
}

}  // namespace gpucmd
