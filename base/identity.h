#ifndef GPUCMDD_BASE_IDENTITY_H_
#define GPUCMDD_BASE_IDENTITY_H_

// The Unix user a process that runs client code takes on when the daemon runs as root
// (Note [Sandbox] in base/sandbox.h): an unprivileged uid and gid, so that whatever
// escapes the sandbox's other layers still holds no capabilities and owns no file.
//
// Thread-safety: LookUpUser is safe from any thread; DropIdentity changes the whole
// process and belongs before it starts threads.

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace gpucmd {

struct UnixIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
};

// The user's uid and primary group. NOT_FOUND naming an unknown user.
absl::StatusOr<UnixIdentity> LookUpUser(const std::string& name);

// Becomes `identity` for good: supplementary groups cleared, then gid, then uid (real,
// effective and saved). Returns 0, or an errno value when a step failed or root could
// be regained afterwards (EPERM).
int DropIdentity(const UnixIdentity& identity) noexcept;

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_IDENTITY_H_
