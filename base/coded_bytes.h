#ifndef GPUCMDD_BASE_CODED_BYTES_H_
#define GPUCMDD_BASE_CODED_BYTES_H_

// Bulk `bytes` fields read straight out of a received message: parsing a message whose
// field holds megabytes allocates a string for it (fresh memory: a page fault per 4 KiB
// on first touch) and copies the bytes there, only for them to be copied again to where
// they are wanted. Reading the field's bytes from the input stream's own buffers (gRPC's
// received slices) copies them once, to their destination.
//
// Thread-safety: as the stream's.

#include <cstdint>
#include <string>

#include "google/protobuf/io/coded_stream.h"

namespace gpucmd {

// Appends the next `size` bytes of `input` to `out`, copied from the stream's buffers.
// False, with `out` as it was, when the stream ends first.
bool AppendRawBytes(google::protobuf::io::CodedInputStream& input, uint32_t size,
                    std::string& out);

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_CODED_BYTES_H_
