// Test helper: a client of another Unix user sharing memory with the daemon. It becomes
// UID:GID (no supplementary groups; run as root unless UID is its own); writes through a
// shared-memory region of its own and reads the bytes back; then hands one more sealed
// memfd over, without registering it, and prints the token answered:
//
//   shared_memory_peer TARGET UID GID
//   round_trip=ok
//   token=<32 hex digits>
//
// With a fourth argument "hold" it instead registers a region and keeps it, printing
// "holding", until it is killed: a client that dies with a region registered.
//
// Exit status: 0 success, 1 a step failed (printed), 2 usage, 3 cannot become the user.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "client/client.h"
#include "tests/integration/peer_process.h"

namespace {

constexpr uint64_t kRegionBytes = 8192;

// Writes a pattern through a region of the session's and reads it back inline.
absl::Status RoundTrip(gpucmd::Client& client) {
  absl::StatusOr<gpucmd::Session> session = client.OpenSession(0, "shared-memory-peer");
  if (!session.ok()) return session.status();
  absl::StatusOr<gpucmd::SharedMemoryRegion> region =
      gpucmd::SharedMemoryRegion::Create(*session, kRegionBytes);
  if (!region.ok()) return region.status();
  absl::StatusOr<gpucmd::Buffer> buffer = session->Allocate(kRegionBytes);
  if (!buffer.ok()) return buffer.status();
  for (uint64_t i = 0; i < kRegionBytes; ++i) region->data()[i] = static_cast<char>(i * 7);
  absl::Status written =
      session->Write(*buffer, 0, gpucmd::RegionSlice{*region, 0, kRegionBytes});
  if (!written.ok()) return written;
  absl::StatusOr<std::string> read = session->Read(*buffer, 0, kRegionBytes);
  if (!read.ok()) return read.status();
  if (std::memcmp(read->data(), region->data(), kRegionBytes) != 0) {
    return absl::DataLossError("the bytes read back differ from the region's");
  }
  return absl::OkStatus();
}

// Registers a region and keeps it until killed; 1 if it cannot.
int Hold(gpucmd::Client& client) {
  absl::StatusOr<gpucmd::Session> session = client.OpenSession(0, "shared-memory-holder");
  if (!session.ok()) {
    std::cout << "open: " << session.status() << "\n";
    return 1;
  }
  absl::StatusOr<gpucmd::SharedMemoryRegion> region =
      gpucmd::SharedMemoryRegion::Create(*session, kRegionBytes);
  if (!region.ok()) {
    std::cout << "region: " << region.status() << "\n";
    return 1;
  }
  std::cout << "holding" << std::endl;
  while (true) pause();
}

}  // namespace

int main(int argc, char** argv) {
  const bool hold = argc == 5 && std::string(argv[4]) == "hold";
  if (argc != 4 && !hold) {
    std::cerr << "usage: shared_memory_peer TARGET UID GID [hold]\n";
    return 2;
  }
  gpucmd::testing::Peer peer = gpucmd::testing::BecomePeer(argv);
  if (peer.client == nullptr) return peer.exit_status;
  gpucmd::Client& client = *peer.client;
  if (hold) return Hold(client);
  if (absl::Status round_trip = RoundTrip(client); !round_trip.ok()) {
    std::cout << "round_trip: " << round_trip << "\n";
    return 1;
  }
  std::cout << "round_trip=ok\n";
  int memfd = memfd_create("shared-memory-peer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0 || ftruncate(memfd, 4096) != 0 || fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    std::perror("shared_memory_peer: memfd");
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
