#include "driver/cpu/cpu_device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(CpuDeviceMemoryTest, AllocationsStayInsideCapacity) {
  auto memory = CpuDeviceMemory::Create(1 << 20, 0);
  ASSERT_TRUE(memory.ok()) << memory.status();
  absl::StatusOr<DeviceResource> a = (*memory)->Allocate(300 << 10);
  absl::StatusOr<DeviceResource> b = (*memory)->Allocate(700 << 10);
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<DeviceResource> c = (*memory)->Allocate(100 << 10);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*memory)->allocated_bytes(), (1000u << 10) + 0);
}

TEST(CpuDeviceMemoryTest, FreedRangesCoalesce) {
  auto memory = CpuDeviceMemory::Create(1 << 20, 0);
  ASSERT_TRUE(memory.ok());
  std::vector<DeviceResource> quarters;
  for (int i = 0; i < 4; ++i) quarters.push_back(*(*memory)->Allocate(256 << 10));
  EXPECT_FALSE((*memory)->Allocate(4096).ok());
  (*memory)->Free(quarters[1]);
  (*memory)->Free(quarters[3]);
  (*memory)->Free(quarters[2]);
  absl::StatusOr<DeviceResource> three_quarters = (*memory)->Allocate(768 << 10);
  ASSERT_TRUE(three_quarters.ok()) << three_quarters.status();
  EXPECT_EQ(three_quarters->address, quarters[1].address);
}

TEST(CpuDeviceMemoryTest, MemoryIsSharedThroughTheMemfd) {
  auto memory = CpuDeviceMemory::Create(1 << 20, 0);
  ASSERT_TRUE(memory.ok());
  DeviceResource range = *(*memory)->Allocate(4096);
  std::memcpy(reinterpret_cast<void*>(range.address), "shared", 6);
  // A second mapping of the same memfd (as an executor process makes) sees the bytes.
  void* other = mmap(nullptr, 1 << 20, PROT_READ, MAP_SHARED, (*memory)->memfd(), 0);
  ASSERT_NE(other, MAP_FAILED);
  uint64_t offset = range.address - reinterpret_cast<DeviceAddress>((*memory)->base());
  EXPECT_EQ(std::memcmp(static_cast<char*>(other) + offset, "shared", 6), 0);
  munmap(other, 1 << 20);
}

TEST(CpuDeviceMemoryTest, FreedRangesReadAsZeroWhenReused) {
  auto memory = CpuDeviceMemory::Create(1 << 20, 0);
  ASSERT_TRUE(memory.ok());
  DeviceResource range = *(*memory)->Allocate(8192);
  std::memset(reinterpret_cast<void*>(range.address), 0xAB, 8192);
  (*memory)->Free(range);
  DeviceResource again = *(*memory)->Allocate(8192);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(again.address)[100], 0)
      << "a previous owner's bytes leaked into a new allocation";
}

}  // namespace
}  // namespace gpucmd
