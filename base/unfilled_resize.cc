#include "base/unfilled_resize.h"

namespace gpucmd {

void ResizeUnfilled(std::string& payload, size_t size) {
  payload.resize_and_overwrite(size, [](char*, size_t kept) { return kept; });
}

}  // namespace gpucmd
