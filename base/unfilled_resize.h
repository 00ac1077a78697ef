#ifndef GPUCMDD_BASE_UNFILLED_RESIZE_H_
#define GPUCMDD_BASE_UNFILLED_RESIZE_H_

// Growing a std::string to hold bytes about to be written over (a copy's destination)
// fills the new characters with zeros first: for a 16 MiB payload, a 16 MiB memset that
// only the copy's own writes undo. C++23's resize_and_overwrite grows it without; this
// library is built as C++23 to reach it (std::string's layout is the same in every
// language mode of one libstdc++).
//
// Thread-safety: as the string's.

#include <cstddef>
#include <string>

namespace gpucmd {

// Sets `payload`'s size to `size`. Characters past its former size are unspecified
// (whatever its memory held): the caller must write them all before anyone reads them.
void ResizeUnfilled(std::string& payload, size_t size);

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_UNFILLED_RESIZE_H_
