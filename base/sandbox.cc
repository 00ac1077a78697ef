#include "base/sandbox.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

// The Landlock ABI as the kernel defines it. Debian 12's headers describe ABI 2; the
// later rights and the larger attribute are spelled out here (stable kernel ABI).
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};

struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

constexpr uint64_t kFsExecute = 1ull << 0;
constexpr uint64_t kFsWriteFile = 1ull << 1;
constexpr uint64_t kFsReadFile = 1ull << 2;
constexpr uint64_t kFsReadDir = 1ull << 3;
constexpr uint64_t kFsRemoveDir = 1ull << 4;
constexpr uint64_t kFsRemoveFile = 1ull << 5;
constexpr uint64_t kFsMakeChar = 1ull << 6;
constexpr uint64_t kFsMakeDir = 1ull << 7;
constexpr uint64_t kFsMakeReg = 1ull << 8;
constexpr uint64_t kFsMakeSock = 1ull << 9;
constexpr uint64_t kFsMakeFifo = 1ull << 10;
constexpr uint64_t kFsMakeBlock = 1ull << 11;
constexpr uint64_t kFsMakeSym = 1ull << 12;
constexpr uint64_t kFsRefer = 1ull << 13;     // ABI 2
constexpr uint64_t kFsTruncate = 1ull << 14;  // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;  // ABI 5
constexpr uint64_t kNetBindTcp = 1ull << 0;
constexpr uint64_t kNetConnectTcp = 1ull << 1;
constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;
constexpr uint64_t kScopeSignal = 1ull << 1;
constexpr uint32_t kRulePathBeneath = 1;
constexpr uint32_t kCreateRulesetVersion = 1u << 0;

// Every filesystem right the ABI knows: what is not granted below is denied.
uint64_t HandledFilesystemRights(int abi) {
  uint64_t rights = kFsExecute | kFsWriteFile | kFsReadFile | kFsReadDir | kFsRemoveDir |
                    kFsRemoveFile | kFsMakeChar | kFsMakeDir | kFsMakeReg | kFsMakeSock |
                    kFsMakeFifo | kFsMakeBlock | kFsMakeSym;
  if (abi >= 2) rights |= kFsRefer;
  if (abi >= 3) rights |= kFsTruncate;
  if (abi >= 5) rights |= kFsIoctlDev;
  return rights;
}

// Grants `rights` (restricted to what the ABI handles) below `path`; skipped when the
// path does not exist.
absl::Status AllowBeneath(int ruleset_fd, const std::string& path, uint64_t rights) {
  int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return absl::OkStatus();
  struct stat info;
  if (fstat(fd, &info) == 0 && !S_ISDIR(info.st_mode)) {
    // Only file rights apply to a file.
    rights &= kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;
  }
  PathBeneathAttr rule{.allowed_access = rights, .parent_fd = fd};
  long added = syscall(SYS_landlock_add_rule, ruleset_fd, kRulePathBeneath, &rule, 0);
  int error = errno;
  close(fd);
  if (added != 0) {
    return absl::InternalError(absl::StrCat("landlock_add_rule(", path, "): ", strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace

int LandlockAbi() {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

absl::StatusOr<Sandbox> Sandbox::Prepare(const SandboxPolicy& policy) {
  int abi = LandlockAbi();
  if (abi < 1) {
    return absl::UnimplementedError("this kernel has no Landlock: client code cannot be "
                                    "confined to its files");
  }
  const uint64_t handled = HandledFilesystemRights(abi);
  RulesetAttr attr{.handled_access_fs = handled};
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;  // no rule grants either
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    size = sizeof(RulesetAttr);
  }
  long fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("landlock_create_ruleset: ", strerror(errno)));
  }
  Sandbox sandbox(static_cast<int>(fd), abi);
  const uint64_t read = kFsReadFile | kFsReadDir;
  const std::pair<const std::vector<std::string>*, uint64_t> grants[] = {
      {&policy.read_only, read},
      {&policy.executable, read | kFsExecute},
      {&policy.read_write, handled & ~kFsExecute}};
  for (const auto& [paths, rights] : grants) {
    for (const std::string& path : *paths) {
      if (absl::Status added = AllowBeneath(sandbox.ruleset_fd_, path, rights); !added.ok()) {
        return added;
      }
    }
  }
  return sandbox;
}

Sandbox::~Sandbox() {
  if (ruleset_fd_ >= 0) close(ruleset_fd_);
}

int Sandbox::Enforce() const noexcept {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (syscall(SYS_landlock_restrict_self, ruleset_fd_, 0) != 0) return errno;
  return 0;
}

}  // namespace gpucmd
