// Copies from and into shared-memory regions on a GPU driver, over its TEST DOUBLE (no
// GPU here; the double counts every asynchronous copy whose host side is not pinned
// memory, which a GPU would have to stage itself, synchronously). A region the driver
// registered is copied in place and stays registered until its registration dies; one
// the driver refused goes through pinned chunks (Note [Staging through pinned chunks]),
// contiguous and pitched, both ways, with the same bytes arriving.
//
// One source, two targets: GPUCMD_TEST_HIP selects the HIP driver, else CUDA.

#include <sys/mman.h>

#include <memory>

#include "gtest/gtest.h"
#include "server/command/command.h"
#include "driver/testing/fake_gpu_control.h"
#include "tests/testing/random_bytes.h"

#if defined(GPUCMD_TEST_HIP)
#include "driver/hip/hip_driver.h"
#else
#include "driver/cuda/cuda_driver.h"
#endif

namespace gpucmd {
namespace {

#if defined(GPUCMD_TEST_HIP)
using TestDriver = HipDriver;
constexpr char kDouble[] = "driver/testing/hip/libamdhip64.so.5";
#else
using TestDriver = CudaDriver;
constexpr char kDouble[] = "driver/testing/cuda/libcuda.so.1";
#endif

constexpr uint64_t kMiB = 1 << 20;
constexpr SessionId kSession = 1;

// Anonymous pages standing in for a client's mapped region.
class HostPages {
 public:
  explicit HostPages(uint64_t size) : size_(size) {
    void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = mapped == MAP_FAILED ? nullptr : static_cast<std::byte*>(mapped);
  }
  ~HostPages() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  std::byte* data() const { return data_; }
  // A view of [offset, +size), as the region table hands out slices.
  Bytes Slice(uint64_t offset, uint64_t size, bool registered) const {
    Bytes slice(data_ + offset, size, nullptr);
    return registered ? std::move(slice).MarkPinned() : std::move(slice);
  }

 private:
  uint64_t size_;
  std::byte* data_ = nullptr;
};

class SharedCopiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<const FakeGpuControl*> fake = LoadFakeGpu(kDouble);
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = *fake;
    auto backend = TestDriver::Backend::Create({.ordinal = 0, .stream_count = 2});
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    command_ = std::make_unique<Command<TestDriver>>(*backend_, CommandOptions());
  }
  void TearDown() override { fake_->refuse_host_registration(0); }

  // Writes `data` from the region per `layout` and reads it back into the region's
  // second half, through slices marked as the table would.
  void RoundTrip(const HostPages& region, uint64_t half, const CopyLayout& layout,
                 bool registered) {
    const uint64_t bytes = layout.host_bytes();
    const std::string data = testing::RandomBytes(bytes, static_cast<uint32_t>(bytes));
    std::memcpy(region.data(), data.data(), bytes);
    absl::StatusOr<BufferId> buffer = command_->Allocate(kSession, layout.offset_bytes +
                                                                      layout.device_extent());
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE(command_->WriteShared(kSession, 0, *buffer, layout,
                                      region.Slice(0, bytes, registered))
                    .ok());
    absl::StatusOr<PendingRead> read = command_->ReadShared(
        kSession, 1, *buffer, layout, region.Slice(half, bytes, registered));
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_TRUE(read->wait().ok());
    EXPECT_EQ(std::memcmp(region.data() + half, data.data(), bytes), 0)
        << "the bytes came back into the region";
    EXPECT_TRUE(command_->Free(kSession, *buffer).ok());
  }

  const FakeGpuControl* fake_ = nullptr;
  std::unique_ptr<typename TestDriver::Backend> backend_;
  std::unique_ptr<Command<TestDriver>> command_;
};

TEST_F(SharedCopiesTest, ARegisteredRegionIsCopiedInPlaceAndUnregisteredWhenDropped) {
  const uint64_t half = 16 * kMiB;
  HostPages region(2 * half);
  ASSERT_NE(region.data(), nullptr);
  const int registered_before = fake_->host_registrations();
  {
    absl::StatusOr<HostRegistration> registration =
        command_->RegisterHost(HostResource{region.data(), 2 * half});
    ASSERT_TRUE(registration.ok()) << registration.status();
    EXPECT_EQ(fake_->host_registrations(), registered_before + 1);
    const int pageable = fake_->pageable_copies();
    RoundTrip(region, half, CopyLayout::Contiguous(0, 9 * kMiB + 5), /*registered=*/true);
    RoundTrip(region, half, CopyLayout::Pitched(64, 1000, 3000, 1536), /*registered=*/true);
    EXPECT_EQ(fake_->pageable_copies(), pageable) << "every copy went straight to the region";
  }
  EXPECT_EQ(fake_->host_registrations(), registered_before) << "the registration ended";
}

TEST_F(SharedCopiesTest, ARefusedRegionIsStagedThroughPinnedChunks) {
  const uint64_t half = 16 * kMiB;
  HostPages region(2 * half);
  ASSERT_NE(region.data(), nullptr);
  fake_->refuse_host_registration(1);
  absl::StatusOr<HostRegistration> registration =
      command_->RegisterHost(HostResource{region.data(), 2 * half});
  EXPECT_FALSE(registration.ok()) << "the double refused";
  const int pageable = fake_->pageable_copies();
  // Several chunks each way, and a remainder; pitched rows split between chunks.
  RoundTrip(region, half, CopyLayout::Contiguous(0, 9 * kMiB + 5), /*registered=*/false);
  RoundTrip(region, half, CopyLayout::Pitched(64, 1000, 9000, 1536), /*registered=*/false);
  RoundTrip(region, half, CopyLayout::Contiguous(0, 100), /*registered=*/false);
  EXPECT_EQ(fake_->pageable_copies(), pageable)
      << "no copy handed the driver unregistered memory";
}

TEST_F(SharedCopiesTest, OverlappingRegistrationsAreRefused) {
  HostPages region(4 * kMiB);
  ASSERT_NE(region.data(), nullptr);
  absl::StatusOr<HostRegistration> first =
      command_->RegisterHost(HostResource{region.data(), 4 * kMiB});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<HostRegistration> again =
      command_->RegisterHost(HostResource{region.data() + kMiB, kMiB});
  EXPECT_FALSE(again.ok()) << "the driver's refusal comes back as a status";
}

}  // namespace
}  // namespace gpucmd
