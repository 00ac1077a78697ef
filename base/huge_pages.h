#ifndef GPUCMDD_BASE_HUGE_PAGES_H_
#define GPUCMDD_BASE_HUGE_PAGES_H_

// Bulk payloads in fresh memory: memory fresh from the system costs a page fault per
// 4 KiB page on its first touch (some 4-13 us each on a virtual machine), and a 256 MiB
// transfer held in fresh memory took about 65,000 of them. Capacity reserved here for
// kHugePageThreshold bytes or more is advised into transparent huge pages before it is
// touched: one fault per 2 MiB. Where the kernel has huge pages off, the advice changes
// nothing.
//
// Thread-safety: may be called from any thread, on a string no other thread uses.

#include <cstdint>
#include <string>

namespace gpucmd {

inline constexpr uint64_t kHugePageThreshold = uint64_t{4} << 20;

// Gives `payload` a capacity of at least `size` bytes, keeping its contents; new capacity
// of kHugePageThreshold or more is advised into huge pages (its whole 2 MiB pages past the
// kept contents).
void ReserveInHugePages(std::string& payload, uint64_t size);

// Lets the kernel take `payload`'s whole pages back whenever it needs memory
// (MADV_FREE), without unmapping them: until it does, they stay in place, and writing to
// them keeps them. The string's characters are unspecified afterwards (a page taken back
// reads as zeros); its size and capacity stay.
void ReleaseLazily(std::string& payload);

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_HUGE_PAGES_H_
