#include "server/connection_quota.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

// Whether `descriptor` still names the socket at `device`/`inode`.
bool StillOpen(int descriptor, dev_t device, ino_t inode) {
  struct stat status {};
  return fstat(descriptor, &status) == 0 && status.st_dev == device && status.st_ino == inode;
}

}  // namespace

absl::Status ConnectionQuota::Admit(int connection, const std::string& user,
                                    bool* first_refusal) {
  *first_refusal = false;
  struct stat status {};
  if (fstat(connection, &status) != 0) {
    return absl::InvalidArgumentError("the accepted connection cannot be examined");
  }
  MutexLock lock(&mutex_);
  UserConnections& connections = users_[user];
  std::vector<Connection>& open = connections.open;
  if (open.size() >= max_per_user_) {
    std::erase_if(open, [](const Connection& counted) {
      return !StillOpen(counted.descriptor, counted.device, counted.inode);
    });
  }
  if (open.size() >= max_per_user_) {
    *first_refusal = !std::exchange(connections.refusing, true);
    return absl::ResourceExhaustedError(
        absl::StrCat("user ", user.empty() ? "(anonymous)" : user, " has ", open.size(),
                     " connections open (limits.max_connections_per_client)"));
  }
  connections.refusing = false;
  open.push_back(Connection{connection, status.st_dev, status.st_ino});
  return absl::OkStatus();
}

}  // namespace gpucmd
