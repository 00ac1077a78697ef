// Test helper: a client of another Unix user. Run as root, it becomes UID:GID (no
// supplementary groups), opens a session named CLIENT_NAME (left open), and prints
// what ListSessions shows that user:
//
//   session_peer TARGET UID GID CLIENT_NAME
//   caller=uid:65534 all_clients=0
//   <client_name> <owner>          (one line per session seen)
//
// Exit status: 0 success, 1 a call failed (printed), 2 usage, 3 cannot become the user.

#include <grp.h>
#include <unistd.h>

#include <iostream>

#include "absl/strings/numbers.h"
#include "client/client.h"

int main(int argc, char** argv) {
  uint32_t uid = 0, gid = 0;
  if (argc != 5 || !absl::SimpleAtoi(argv[2], &uid) || !absl::SimpleAtoi(argv[3], &gid)) {
    std::cerr << "usage: session_peer TARGET UID GID CLIENT_NAME\n";
    return 2;
  }
  if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
    std::perror("session_peer: cannot become the user");
    return 3;
  }
  absl::StatusOr<std::unique_ptr<gpucmd::Client>> client = gpucmd::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::cout << "connect: " << client.status() << "\n";
    return 1;
  }
  // Through the raw stub: no lease and no close, so the session outlives this process.
  gpucmd::v1::OpenSessionRequest request;
  request.set_client_name(argv[4]);
  grpc::ClientContext context;
  gpucmd::v1::OpenSessionResponse response;
  grpc::Status status = (*client)->stub().OpenSession(&context, request, &response);
  if (!status.ok()) {
    std::cout << "open: " << status.error_code() << " " << status.error_message() << "\n";
    return 1;
  }
  absl::StatusOr<gpucmd::v1::ListSessionsResponse> sessions = (*client)->ListSessions();
  if (!sessions.ok()) {
    std::cout << "list: " << sessions.status() << "\n";
    return 1;
  }
  std::cout << "caller=" << sessions->caller() << " all_clients=" << sessions->all_clients()
            << "\n";
  for (const gpucmd::v1::SessionSummary& session : sessions->sessions()) {
    std::cout << session.client_name() << " " << session.owner() << "\n";
  }
  return 0;
}
