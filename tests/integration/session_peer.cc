// Test helper: a client of another Unix user. Run as root, it becomes UID:GID (no
// supplementary groups), opens a session named CLIENT_NAME (left open), and prints
// what ListSessions shows that user:
//
//   session_peer TARGET UID GID CLIENT_NAME
//   caller=uid:65534 all_clients=0
//   <client_name> <owner>          (one line per session seen)
//
// Exit status: 0 success, 1 a call failed (printed), 2 usage, 3 cannot become the user.

#include <iostream>

#include "client/client.h"
#include "tests/integration/peer_process.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: session_peer TARGET UID GID CLIENT_NAME\n";
    return 2;
  }
  gpucmd::testing::Peer peer = gpucmd::testing::BecomePeer(argv);
  if (peer.client == nullptr) return peer.exit_status;
  gpucmd::Client* client = peer.client.get();
  // Through the raw stub: no lease and no close, so the session outlives this process.
  gpucmd::v1::OpenSessionRequest request;
  request.set_client_name(argv[4]);
  grpc::ClientContext context;
  gpucmd::v1::OpenSessionResponse response;
  grpc::Status status = client->stub().OpenSession(&context, request, &response);
  if (!status.ok()) {
    std::cout << "open: " << status.error_code() << " " << status.error_message() << "\n";
    return 1;
  }
  absl::StatusOr<gpucmd::v1::ListSessionsResponse> sessions = client->ListSessions();
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
