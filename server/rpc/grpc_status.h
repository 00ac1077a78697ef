#ifndef GPUCMDD_SERVER_RPC_GRPC_STATUS_H_
#define GPUCMDD_SERVER_RPC_GRPC_STATUS_H_

// The one place an absl::Status becomes a grpc::Status (the codes share numbering).
// A status message travels in a header, which clients accept up to 8 KiB by default
// (percent-encoded: up to three bytes each), so longer messages are cut to fit, saying
// how much was cut; whole compile logs are fetched with GetCompileLog.

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gpucmd {

// The longest status message sent, in bytes before encoding.
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// `message` cut to kMaxStatusMessageBytes at a UTF-8 character boundary, ending with
// how many bytes were cut.
std::string CapStatusMessage(std::string message);

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      CapStatusMessage(std::string(status.message())));
}

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_GRPC_STATUS_H_
