#ifndef GPUCMDD_SERVER_RPC_GRPC_STATUS_H_
#define GPUCMDD_SERVER_RPC_GRPC_STATUS_H_

// The one place an absl::Status becomes a grpc::Status (the codes share numbering).

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gpucmd {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_GRPC_STATUS_H_
