#ifndef GPUCMDD_SERVER_RPC_REQUEST_VALIDATION_H_
#define GPUCMDD_SERVER_RPC_REQUEST_VALIDATION_H_

// Shape checks on requests, done before a request reaches a session or a device: a
// request that fails here is INVALID_ARGUMENT (or NOT_FOUND for a device that does not
// exist) and nothing has been touched. Checks that need state (bounds against a
// buffer's size, handle lookups) happen later, on the device thread.

#include "absl/status/status.h"
#include "gpucmd/v1/gpucmd.pb.h"

namespace gpucmd {

absl::Status ValidateOpenSession(const v1::OpenSessionRequest& request, int device_count);
absl::Status ValidateSessionToken(const std::string& session);
absl::Status ValidateKernelId(const std::string& kernel_id);
absl::Status ValidateAllocate(const v1::AllocateRequest& request);
absl::Status ValidatePitchedLayout(const v1::PitchedLayout& layout);
absl::Status ValidateWriteHeader(const v1::WriteHeader& header);
absl::Status ValidateRead(const v1::ReadRequest& request);
// The session token, and the ranges: a size not overflowing from either offset, or
// pitched rows (each side's stride at least the width, its span within 64 bits) with no
// size besides. The rows against the buffers, and overlap within one, are the device's
// to check.
absl::Status ValidateCopy(const v1::CopyRequest& request);
// The session token, and the range: a size not overflowing from the offset, or a pitched
// layout (ValidatePitchedLayout) with no size besides. The pattern, and the range against
// the buffer, are the device's to check (CheckFill).
absl::Status ValidateFill(const v1::FillRequest& request);
absl::Status ValidateCompile(const v1::CompileRequest& request);
absl::Status ValidateLaunch(const v1::LaunchRequest& request);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_REQUEST_VALIDATION_H_
