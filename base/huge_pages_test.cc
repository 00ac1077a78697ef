#include "base/huge_pages.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// The line starting with `field` of the mapping of this process that holds `address`,
// from /proc/self/smaps; empty when no mapping holds it.
std::string MappingField(const void* address, const std::string& field) {
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
    } else if (inside && line.rfind(field, 0) == 0) {
      return line;
    }
  }
  return "";
}

std::string MappingFlags(const void* address) { return MappingField(address, "VmFlags:"); }

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

TEST(HugePagesTest, LazilyReleasedPagesStayMappedUntilTheKernelNeedsThem) {
  std::string payload(16 * kMiB, 'x');  // its own mapping, every page touched
  const char* memory = payload.data();
  auto lazy_free_kib = [&] {
    std::istringstream line(MappingField(memory, "LazyFree:"));
    std::string name;
    uint64_t kib = 0;
    line >> name >> kib;
    return kib;
  };
  EXPECT_EQ(lazy_free_kib(), 0u);
  ReleaseLazily(payload);
  EXPECT_GE(lazy_free_kib(), 15 * 1024u) << "all its whole pages";
  EXPECT_EQ(payload.data(), memory);
  EXPECT_EQ(payload.size(), 16 * kMiB);
  payload.assign(kMiB, 'y');  // written again: in use, in place
  EXPECT_EQ(payload.data(), memory);
  EXPECT_EQ(payload, std::string(kMiB, 'y'));
}

}  // namespace
}  // namespace gpucmd
