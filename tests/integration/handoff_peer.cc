// Test helper: a client of another Unix user handing a memfd over. Run as root, it
// becomes UID:GID (no supplementary groups), creates a sealed memfd of 4096 bytes, hands
// it to the daemon at TARGET over the descriptor socket and prints the token answered:
//
//   handoff_peer TARGET UID GID
//   token=<32 hex digits>
//
// Exit status: 0 success, 1 the handover failed (printed), 2 usage, 3 cannot become the
// user.

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "client/client.h"

int main(int argc, char** argv) {
  uint32_t uid = 0, gid = 0;
  if (argc != 4 || !absl::SimpleAtoi(argv[2], &uid) || !absl::SimpleAtoi(argv[3], &gid)) {
    std::cerr << "usage: handoff_peer TARGET UID GID\n";
    return 2;
  }
  if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
    std::perror("handoff_peer: cannot become the user");
    return 3;
  }
  int memfd = memfd_create("handoff-peer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0 || ftruncate(memfd, 4096) != 0 || fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    std::perror("handoff_peer: memfd");
    return 1;
  }
  absl::StatusOr<std::string> token = gpucmd::HandOverDescriptor(argv[1], memfd);
  close(memfd);
  if (!token.ok()) {
    std::cout << "handoff: " << token.status() << "\n";
    return 1;
  }
  std::cout << "token=" << *token << "\n";
  return 0;
}
