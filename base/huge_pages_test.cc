#include "base/huge_pages.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// The VmFlags line of the mapping of this process that holds `address`, from
// /proc/self/smaps; empty when no mapping holds it.
std::string MappingFlags(const void* address) {
  const uintptr_t wanted = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= wanted && wanted < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(HugePagesTest, LargeReservationsAreAdvisedIntoHugePages) {
  std::string payload = "kept";
  ReserveInHugePages(payload, 16 * kMiB);
  EXPECT_EQ(payload, "kept");
  ASSERT_GE(payload.capacity(), 16 * kMiB);
  // The first whole 2 MiB page inside the new capacity carries the advice ("hg").
  const uintptr_t huge_page = 2 * kMiB;
  const uintptr_t inside =
      (reinterpret_cast<uintptr_t>(payload.data()) + payload.size() + huge_page - 1) &
      ~(huge_page - 1);
  EXPECT_NE(MappingFlags(reinterpret_cast<const void*>(inside)).find(" hg"), std::string::npos);

  std::string small;
  ReserveInHugePages(small, kMiB);
  EXPECT_GE(small.capacity(), kMiB);
  EXPECT_EQ(MappingFlags(small.data()).find(" hg"), std::string::npos)
      << "under kHugePageThreshold nothing is advised";

  const char* memory = payload.data();
  ReserveInHugePages(payload, 8 * kMiB);
  EXPECT_EQ(payload.data(), memory) << "enough capacity already: nothing moves";
}

}  // namespace
}  // namespace gpucmd
