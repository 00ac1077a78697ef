// Request shape checks on any bytes (Note [Fuzzing]): the first byte picks the request
// type, the rest is parsed as one, as gRPC would, then validated.

#include "google/protobuf/stubs/logging.h"
#include "gpucmd/v1/gpucmd.pb.h"
#include "server/rpc/request_validation.h"
#include "tests/fuzz/fuzz_input.h"

namespace gpucmd {
namespace {

template <typename Request>
bool Parse(const std::string& bytes, Request* request) {
  return request->ParseFromString(bytes);
}

void Validate(uint8_t kind, const std::string& bytes) {
  switch (kind % 9) {
    case 0:
      if (v1::OpenSessionRequest r; Parse(bytes, &r)) ValidateOpenSession(r, 2).IgnoreError();
      break;
    case 1:
      if (v1::AllocateRequest r; Parse(bytes, &r)) ValidateAllocate(r).IgnoreError();
      break;
    case 2:
      if (v1::WriteRequest r; Parse(bytes, &r)) ValidateWriteHeader(r.header()).IgnoreError();
      break;
    case 3:
      if (v1::ReadRequest r; Parse(bytes, &r)) ValidateRead(r).IgnoreError();
      break;
    case 4:
      if (v1::CopyRequest r; Parse(bytes, &r)) ValidateCopy(r).IgnoreError();
      break;
    case 5:
      if (v1::CompileRequest r; Parse(bytes, &r)) ValidateCompile(r).IgnoreError();
      break;
    case 6:
      if (v1::LaunchRequest r; Parse(bytes, &r)) ValidateLaunch(r).IgnoreError();
      break;
    case 8:
      if (v1::FillRequest r; Parse(bytes, &r)) ValidateFill(r).IgnoreError();
      break;
    case 7:
      ValidateSessionToken(bytes).IgnoreError();
      ValidateKernelId(bytes).IgnoreError();
      break;
  }
}

}  // namespace
}  // namespace gpucmd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Invalid UTF-8 in string fields is an ordinary parse failure, not news for the log.
  static const bool kQuiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)kQuiet;
  if (size == 0) return 0;
  gpucmd::Validate(data[0], gpucmd::fuzzing::AsString(data + 1, size - 1));
  return 0;
}
