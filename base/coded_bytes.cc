#include "base/coded_bytes.h"

#include <algorithm>

namespace gpucmd {

bool AppendRawBytes(google::protobuf::io::CodedInputStream& input, uint32_t size,
                    std::string& out) {
  const size_t kept = out.size();
  // Appended straight from the buffers: growing the string first would fill it with
  // zeros only for them to be overwritten.
  for (uint32_t left = size; left > 0;) {
    const void* buffer = nullptr;
    int available = 0;
    if (!input.GetDirectBufferPointer(&buffer, &available)) {
      out.resize(kept);
      return false;
    }
    const int taken = static_cast<int>(std::min<uint32_t>(left, available));
    out.append(static_cast<const char*>(buffer), taken);
    input.Skip(taken);
    left -= taken;
  }
  return true;
}

}  // namespace gpucmd
