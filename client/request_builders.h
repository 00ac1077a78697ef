#ifndef GPUCMDD_CLIENT_REQUEST_BUILDERS_H_
#define GPUCMDD_CLIENT_REQUEST_BUILDERS_H_

// The requests of the client's typed calls, built once for both ways of sending them: a
// Session's unary calls and a SubmitBatch's commands (client/submit_stream.h). Each names the
// session whose token is `session`.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "gpucmd/v1/gpucmd.pb.h"

namespace gpucmd {

v1::PitchedLayout PitchedLayoutOf(const Pitched& rows);
// `size` bytes of `buffer` from `offset`, answered inline.
v1::ReadRequest ContiguousRead(const std::string& session, const Buffer& buffer, uint64_t offset,
                               uint64_t size, uint64_t stream);
// `rows` of `buffer` from `offset`, answered inline as packed rows.
v1::ReadRequest PitchedRead(const std::string& session, const Buffer& buffer, uint64_t offset,
                            const Pitched& rows, uint64_t stream);
// The target slice's size of `buffer` from `offset` into the slice; or `pitched` rows
// from there, packed into the slice (which holds exactly their bytes).
v1::ReadRequest SharedRead(const std::string& session, const Buffer& buffer, uint64_t offset,
                           const RegionSlice& target, uint64_t stream,
                           const std::optional<Pitched>& pitched);
// The header of `size` bytes sent inline into `buffer` at `offset`: contiguous, or packed
// rows landing as `pitched` lays them out from there.
v1::WriteHeader InlineWrite(const std::string& session, const Buffer& buffer, uint64_t offset,
                            uint64_t size, const std::optional<Pitched>& pitched, uint64_t stream);
// The source slice's bytes into `buffer` at `offset`; or packed rows landing as
// `pitched` lays them out from there.
v1::WriteHeader SharedWrite(const std::string& session, const Buffer& buffer, uint64_t offset,
                            const RegionSlice& source, uint64_t stream,
                            const std::optional<Pitched>& pitched);
v1::CopyRequest CopyBetween(const std::string& session, const Buffer& source,
                            uint64_t source_offset, const Buffer& target, uint64_t target_offset,
                            uint64_t size_bytes, uint64_t stream);
// `rows` from `source_offset` in `source` to `target_offset` in `target`.
v1::CopyRequest PitchedCopyBetween(const std::string& session, const Buffer& source,
                                   uint64_t source_offset, const Buffer& target,
                                   uint64_t target_offset, const CopyRows& rows, uint64_t stream);
// `size_bytes` of `buffer` from `offset`, each `element_bytes` (1, 2 or 4) set to `value`.
v1::FillRequest FillOf(const std::string& session, const Buffer& buffer, uint64_t offset,
                       uint64_t size_bytes, uint32_t value, uint32_t element_bytes,
                       uint64_t stream);
// The same over `rows` of `buffer` from `offset`.
v1::FillRequest PitchedFillOf(const std::string& session, const Buffer& buffer, uint64_t offset,
                              const Pitched& rows, uint32_t value, uint32_t element_bytes,
                              uint64_t stream);
v1::LaunchRequest LaunchOf(const std::string& session, const std::string& kernel_id,
                           const LaunchShape& shape, const std::vector<v1::KernelArg>& args,
                           uint64_t stream);
// Every stream of the session when `stream` is absent.
v1::SynchronizeRequest SynchronizeOf(const std::string& session, std::optional<uint64_t> stream);

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_REQUEST_BUILDERS_H_
