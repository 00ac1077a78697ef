#ifndef GPUCMDD_TESTS_INTEGRATION_PEER_PROCESS_H_
#define GPUCMDD_TESTS_INTEGRATION_PEER_PROCESS_H_

// The start that the helpers run as clients of another Unix user share: with TARGET UID
// GID as argv[1..3] (checked by the caller), become UID:GID with no supplementary groups
// (nothing to do where UID is this process's already; otherwise root is needed), then
// connect to the daemon at TARGET.

#include <grp.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "client/client.h"

namespace gpucmd::testing {

struct Peer {
  std::unique_ptr<Client> client;  // null on failure
  int exit_status = 0;             // on failure: 1 cannot connect (printed), 3 cannot become
};

inline Peer BecomePeer(char** argv) {
  uint32_t uid = 0, gid = 0;
  if (!absl::SimpleAtoi(argv[2], &uid) || !absl::SimpleAtoi(argv[3], &gid) ||
      (uid != geteuid() && (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0))) {
    std::perror("cannot become the user");
    return {nullptr, 3};
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(argv[1]);
  if (!client.ok()) {
    std::cout << "connect: " << client.status() << "\n";
    return {nullptr, 1};
  }
  return {*std::move(client), 0};
}

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_INTEGRATION_PEER_PROCESS_H_
