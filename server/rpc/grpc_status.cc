#include "server/rpc/grpc_status.h"

#include "absl/strings/str_cat.h"

namespace gpucmd {

std::string CapStatusMessage(std::string message) {
  if (message.size() <= kMaxStatusMessageBytes) return message;
  constexpr size_t kRoomForNote = 64;
  size_t keep = kMaxStatusMessageBytes - kRoomForNote;
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xc0) == 0x80) --keep;
  const size_t cut = message.size() - keep;
  message.resize(keep);
  absl::StrAppend(&message, "\n... (", cut, " more bytes cut)");
  return message;
}

}  // namespace gpucmd
