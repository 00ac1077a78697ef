#ifndef GPUCMDD_DRIVER_TESTING_DRIVER_CONFORMANCE_H_
#define GPUCMDD_DRIVER_TESTING_DRIVER_CONFORMANCE_H_

// The driver conformance suite: typed tests written once against the Driver concept.
// A backend leaf runs it by specialising ConformanceBackend<D> (how to create a small
// backend, or skip when no device exists) and instantiating the suite:
//
//   template <> struct gpucmd::ConformanceBackend<CpuDriver> { static ... Create(); };
//   INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, DriverConformanceTest, CpuDriver);

#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/driver.h"
#include "gtest/gtest.h"

namespace gpucmd {

// Specialised by each leaf: `static absl::StatusOr<std::unique_ptr<typename
// D::Backend>> Create(uint64_t capacity_bytes)`; an UNAVAILABLE status skips the
// suite (no device on this machine). A specialisation that can corrupt the device's
// context on purpose (a test double) also has `static void InjectStickyError()` and
// `static int ContextResets()` (how many times the context was reset so far).
template <typename D>
struct ConformanceBackend;

// Counts pinned releases so tests can see Bytes give their memory back.
class CountingPinnedOwner final : public PinnedOwner {
 public:
  void Release(uint64_t allocation) override { released_.push_back(allocation); }
  const std::vector<uint64_t>& released() const { return released_; }

 private:
  std::vector<uint64_t> released_;
};

template <typename D>
class DriverConformanceTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kCapacityBytes = uint64_t{64} << 20;

  void SetUp() override {
    auto backend = ConformanceBackend<D>::Create(kCapacityBytes);
    if (absl::IsUnavailable(backend.status())) GTEST_SKIP() << backend.status();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    ASSERT_GE(backend_->stream_count(), 2) << "the suite needs two streams";
  }

  void TearDown() override {
    for (const HostResource& host : pinned_) backend_->FreePinned(host);
    for (const DeviceResource& device : device_) backend_->FreeDevice(device);
  }

  DeviceResource Device(uint64_t size) {
    absl::StatusOr<DeviceResource> device = backend_->AllocateDevice(size);
    EXPECT_TRUE(device.ok()) << device.status();
    device_.push_back(*device);
    return *device;
  }

  // Pinned bytes holding `contents` (or `size` zero bytes).
  Bytes Pinned(uint64_t size, const std::vector<uint8_t>& contents = {}) {
    absl::StatusOr<HostResource> host = backend_->AllocatePinned(size);
    EXPECT_TRUE(host.ok()) << host.status();
    pinned_.push_back(*host);
    std::memset(host->data, 0, size);
    if (!contents.empty()) std::memcpy(host->data, contents.data(), contents.size());
    return D::PinnedBytes(PinnedBinding{&owner_, pinned_.size()}, *host, size);
  }

  static std::vector<uint8_t> RandomBytes(size_t size, uint32_t seed) {
    std::mt19937 random(seed);
    std::vector<uint8_t> bytes(size);
    for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(random());
    return bytes;
  }

  static std::vector<uint8_t> Contents(const Bytes& bytes) {
    auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    return std::vector<uint8_t>(data, data + bytes.size());
  }

  void Upload(const DeviceResource& device, const CopyLayout& layout, const Bytes& data,
              int stream = 0) {
    ASSERT_TRUE(D::CopyToDevice(device, layout, data.const_span(), backend_->stream(stream)).ok());
  }

  // Queues on stream 0 a copy of `data` to the device and back into `out` (pinned, as
  // large): the work an event recorded next completes after.
  void QueueRoundTrip(const std::vector<uint8_t>& data, Bytes& out) {
    const DeviceResource device = Device(data.size());
    const CopyLayout whole = CopyLayout::Contiguous(0, data.size());
    Bytes staged = Pinned(data.size(), data);  // its memory stays until TearDown
    Upload(device, whole, staged);
    ASSERT_TRUE(D::CopyToHost(device, whole, out, backend_->stream(0)).ok());
  }

  std::vector<uint8_t> Download(const DeviceResource& device, const CopyLayout& layout,
                                int stream = 0) {
    Bytes out = Pinned(layout.host_bytes());
    EXPECT_TRUE(D::CopyToHost(device, layout, out, backend_->stream(stream)).ok());
    EXPECT_TRUE(backend_->stream(stream).Synchronize().ok());
    return Contents(out);
  }

  std::unique_ptr<typename D::Backend> backend_;
  CountingPinnedOwner owner_;
  std::vector<HostResource> pinned_;
  std::vector<DeviceResource> device_;
};

TYPED_TEST_SUITE_P(DriverConformanceTest);

TYPED_TEST_P(DriverConformanceTest, ContiguousCopiesRoundTrip) {
  constexpr uint64_t kSize = 1 << 20;
  DeviceResource device = this->Device(kSize);
  std::vector<uint8_t> data = this->RandomBytes(kSize, 1);
  Bytes staged = this->Pinned(kSize, data);
  this->Upload(device, CopyLayout::Contiguous(0, kSize), staged);
  EXPECT_EQ(this->Download(device, CopyLayout::Contiguous(0, kSize)), data);
  // A sub-range at an offset.
  std::vector<uint8_t> middle(data.begin() + 1000, data.begin() + 1500);
  EXPECT_EQ(this->Download(device, CopyLayout::Contiguous(1000, 500)), middle);
}

TYPED_TEST_P(DriverConformanceTest, PitchedCopiesTouchOnlyTheirRows) {
  constexpr uint64_t kWidth = 100, kHeight = 7, kStride = 128, kOffset = 64;
  constexpr uint64_t kSize = 4096;
  DeviceResource device = this->Device(kSize);
  std::vector<uint8_t> background(kSize, 0xEE);
  Bytes background_bytes = this->Pinned(kSize, background);
  this->Upload(device, CopyLayout::Contiguous(0, kSize), background_bytes);

  std::vector<uint8_t> rows = this->RandomBytes(kWidth * kHeight, 2);
  Bytes rows_bytes = this->Pinned(rows.size(), rows);
  CopyLayout pitched = CopyLayout::Pitched(kOffset, kWidth, kHeight, kStride);
  this->Upload(device, pitched, rows_bytes);

  std::vector<uint8_t> expected = background;
  for (uint64_t row = 0; row < kHeight; ++row) {
    std::memcpy(&expected[kOffset + row * kStride], &rows[row * kWidth], kWidth);
  }
  EXPECT_EQ(this->Download(device, CopyLayout::Contiguous(0, kSize)), expected)
      << "padding between rows or bytes outside the region changed";
  EXPECT_EQ(this->Download(device, pitched), rows) << "a pitched read returns packed rows";
}

TYPED_TEST_P(DriverConformanceTest, RelocationCopyMovesTheBytes) {
  constexpr uint64_t kSize = 256 << 10;
  DeviceResource source = this->Device(kSize);
  DeviceResource target = this->Device(kSize);
  std::vector<uint8_t> data = this->RandomBytes(kSize, 3);
  Bytes staged = this->Pinned(kSize, data);
  this->Upload(source, CopyLayout::Contiguous(0, kSize), staged);
  auto& stream = this->backend_->stream(0);
  ASSERT_TRUE(TypeParam::CopyOnDevice(source, target, stream.signal()).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(this->Download(target, CopyLayout::Contiguous(0, kSize)), data);
}

// Pitched copies between two allocations, and between the columns of one, move each
// row to its own stride and leave every other byte of the target as it was. Brief ones,
// and 12 MB of rows that the CPU driver splits between threads.
TYPED_TEST_P(DriverConformanceTest, PitchedDeviceCopiesMoveOnlyTheirRows) {
  constexpr uint64_t kSize = 17 << 20;
  DeviceResource source = this->Device(kSize);
  DeviceResource target = this->Device(kSize);
  const std::vector<uint8_t> from = this->RandomBytes(kSize, 7);
  const std::vector<uint8_t> background = this->RandomBytes(kSize, 8);
  Bytes from_bytes = this->Pinned(kSize, from);
  Bytes background_bytes = this->Pinned(kSize, background);
  auto& stream = this->backend_->stream(0);
  const DeviceCopyLayout copies[] = {{.source_offset_bytes = 100,
                                      .target_offset_bytes = 3,
                                      .width_bytes = 700,
                                      .height = 30,
                                      .source_stride_bytes = 700,
                                      .target_stride_bytes = 1024},
                                     {.source_offset_bytes = 5,
                                      .target_offset_bytes = 64,
                                      .width_bytes = 3000,
                                      .height = 4000,
                                      .source_stride_bytes = 4096,
                                      .target_stride_bytes = 3000}};
  for (const DeviceCopyLayout& copy : copies) {
    this->Upload(source, CopyLayout::Contiguous(0, kSize), from_bytes);  // ordered before
    this->Upload(target, CopyLayout::Contiguous(0, kSize), background_bytes);
    ASSERT_TRUE(TypeParam::CopyRowsOnDevice(source, target, copy, stream.signal()).ok());
    std::vector<uint8_t> expected = background;
    for (uint64_t row = 0; row < copy.height; ++row) {
      std::memcpy(&expected[copy.target_offset_bytes + row * copy.target_stride_bytes],
                  &from[copy.source_offset_bytes + row * copy.source_stride_bytes],
                  copy.width_bytes);
    }
    EXPECT_EQ(this->Download(target, CopyLayout::Contiguous(0, kSize)), expected)
        << copy.height << " rows of " << copy.width_bytes << " bytes";
  }
  // Columns [0, 256) of 64 rows of 1 KiB onto columns [512, 768) of the same rows.
  const DeviceCopyLayout columns{.target_offset_bytes = 512,
                                 .width_bytes = 256,
                                 .height = 64,
                                 .source_stride_bytes = 1024,
                                 .target_stride_bytes = 1024};
  this->Upload(source, CopyLayout::Contiguous(0, kSize), from_bytes);
  ASSERT_TRUE(TypeParam::CopyRowsOnDevice(source, source, columns, stream.signal()).ok());
  std::vector<uint8_t> expected = from;
  for (uint64_t row = 0; row < 64; ++row) {
    std::memcpy(&expected[512 + row * 1024], &from[row * 1024], 256);
  }
  EXPECT_EQ(this->Download(source, CopyLayout::Contiguous(0, kSize)), expected);
}

// Fills of 1-, 2- and 4-byte elements set each element of their range (or of their
// rows, when they are pitched), little-endian as the device stores it, and leave every
// byte around them (the padding between rows too) as it was. Brief ones, and bulk ones
// that the CPU driver splits between threads as it does copies.
TYPED_TEST_P(DriverConformanceTest, FillsSetTheirRangeAndNothingElse) {
  constexpr uint64_t kSize = 21 << 20, kOffset = 1024;
  DeviceResource device = this->Device(kSize);
  std::vector<uint8_t> background = this->RandomBytes(kSize, 6);
  Bytes staged = this->Pinned(kSize, background);
  auto& stream = this->backend_->stream(0);
  // Below and above the size the CPU driver runs where it is queued.
  for (const CopyLayout& layout :
       {CopyLayout::Contiguous(kOffset, 40000), CopyLayout::Contiguous(kOffset, 200000),
        CopyLayout::Pitched(kOffset, 1000, 40, 1500), CopyLayout::Pitched(kOffset, 2000, 100, 2400),
        CopyLayout::Contiguous(kOffset, (20 << 20) + 4100),
        CopyLayout::Pitched(kOffset, 3000, 4000, 4096)}) {
    for (const FillPattern pattern :
         {FillPattern{0xa5, 1}, FillPattern{0xbeef, 2}, FillPattern{0x01020304, 4}}) {
      this->Upload(device, CopyLayout::Contiguous(0, kSize), staged);  // ordered before
      ASSERT_TRUE(TypeParam::FillOnDevice(device, layout, pattern, stream.signal()).ok());
      ASSERT_TRUE(stream.Synchronize().ok());
      std::vector<uint8_t> expected = background;
      for (uint64_t row = 0; row < layout.height; ++row) {
        const uint64_t start = layout.offset_bytes + row * layout.stride_bytes;
        for (uint64_t i = 0; i < layout.width_bytes; ++i) {
          expected[start + i] =
              static_cast<uint8_t>(pattern.value >> (8 * (i % pattern.element_bytes)));
        }
      }
      EXPECT_EQ(this->Download(device, CopyLayout::Contiguous(0, kSize)), expected)
          << layout.height << " rows of " << layout.width_bytes << " bytes, " << layout.stride_bytes
          << " apart, of " << pattern.element_bytes << "-byte elements";
    }
  }
}

// Bulk copies, which the CPU driver splits between threads (Note [Copies on several
// cores] in driver/cpu/copy_engine.h): every byte lands where it belongs, and none else.
TYPED_TEST_P(DriverConformanceTest, BulkCopiesMoveEveryByte) {
  constexpr uint64_t kSize = (20 << 20) + 4099, kOffset = 12345;
  DeviceResource device = this->Device(kOffset + kSize + 100);
  std::vector<uint8_t> data = this->RandomBytes(kSize, 4);
  Bytes staged = this->Pinned(kSize, data);
  this->Upload(device, CopyLayout::Contiguous(kOffset, kSize), staged);
  EXPECT_EQ(this->Download(device, CopyLayout::Contiguous(kOffset, kSize)), data);

  DeviceResource target = this->Device(device.size_bytes);
  auto& stream = this->backend_->stream(0);
  ASSERT_TRUE(TypeParam::CopyOnDevice(device, target, stream.signal()).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(this->Download(target, CopyLayout::Contiguous(kOffset, kSize)), data)
      << "the relocation copy";

  // Rows of 3000 bytes, 4096 apart: 12 MB of rows; the padding keeps what was there.
  constexpr uint64_t kWidth = 3000, kHeight = 4000, kStride = 4096;
  std::vector<uint8_t> rows = this->RandomBytes(kWidth * kHeight, 5);
  Bytes rows_bytes = this->Pinned(rows.size(), rows);
  CopyLayout pitched = CopyLayout::Pitched(kOffset, kWidth, kHeight, kStride);
  this->Upload(device, pitched, rows_bytes);
  EXPECT_EQ(this->Download(device, pitched), rows);
  std::vector<uint8_t> expected(data.begin(), data.begin() + kHeight * kStride);
  for (uint64_t row = 0; row < kHeight; ++row) {
    std::memcpy(&expected[row * kStride], &rows[row * kWidth], kWidth);
  }
  EXPECT_EQ(this->Download(device, CopyLayout::Contiguous(kOffset, kHeight * kStride)), expected)
      << "bytes between the rows changed";
}

TYPED_TEST_P(DriverConformanceTest, EventsOrderWorkAcrossStreams) {
  constexpr uint64_t kSize = 8 << 20;
  DeviceResource device = this->Device(kSize);
  for (uint32_t round = 0; round < 4; ++round) {
    std::vector<uint8_t> data = this->RandomBytes(kSize, 10 + round);
    Bytes staged = this->Pinned(kSize, data);
    this->Upload(device, CopyLayout::Contiguous(0, kSize), staged, /*stream=*/0);
    auto event = this->backend_->stream(0).RecordEvent();
    ASSERT_TRUE(this->backend_->stream(1).WaitEvent(event).ok());
    EXPECT_EQ(this->Download(device, CopyLayout::Contiguous(0, kSize), /*stream=*/1), data);
    EXPECT_TRUE(event.IsComplete());
  }
}

TYPED_TEST_P(DriverConformanceTest, EventWaitBlocksUntilPriorWorkCompleted) {
  const std::vector<uint8_t> data = this->RandomBytes(16 << 20, 20);
  Bytes out = this->Pinned(data.size());
  this->QueueRoundTrip(data, out);
  auto event = this->backend_->stream(0).RecordEvent();
  ASSERT_TRUE(event.Wait().ok());
  EXPECT_TRUE(event.IsComplete());
  EXPECT_EQ(this->Contents(out), data);
}

// Where a driver's events can call back (NotifyingEvent), they do so once the work before
// them ran: the callback sees the copy's bytes.
TYPED_TEST_P(DriverConformanceTest, EventsCallBackOnceTheirWorkRan) {
  using Event = typename TypeParam::Stream::Event;
  if constexpr (!NotifyingEvent<Event>) {
    GTEST_SKIP() << "this driver's events cannot call back";
  } else {
    const std::vector<uint8_t> data = this->RandomBytes(16 << 20, 30);
    Bytes out = this->Pinned(data.size());
    this->QueueRoundTrip(data, out);
    Event event = this->backend_->stream(0).RecordEvent();
    std::promise<bool> saw_the_bytes;
    event.OnComplete([&] {
      saw_the_bytes.set_value(event.IsComplete() && this->Contents(out) == data);
    });
    EXPECT_TRUE(saw_the_bytes.get_future().get());
  }
}

TYPED_TEST_P(DriverConformanceTest, OutOfMemoryIsResourceExhaustedAndRecoverable) {
  const uint64_t capacity = this->backend_->capacity_bytes();
  const uint64_t chunk = capacity / 8;
  EXPECT_EQ(this->backend_->AllocateDevice(capacity + 4096).status().code(),
            absl::StatusCode::kResourceExhausted);
  std::vector<DeviceResource> held;
  while (true) {
    absl::StatusOr<DeviceResource> device = this->backend_->AllocateDevice(chunk);
    if (!device.ok()) {
      EXPECT_EQ(device.status().code(), absl::StatusCode::kResourceExhausted);
      break;
    }
    held.push_back(*device);
    ASSERT_LE(held.size(), 8u) << "the backend hands out more than its capacity";
  }
  ASSERT_FALSE(held.empty());
  this->backend_->FreeDevice(held.back());
  held.pop_back();
  absl::StatusOr<DeviceResource> again = this->backend_->AllocateDevice(chunk);
  EXPECT_TRUE(again.ok()) << again.status();
  if (again.ok()) held.push_back(*again);
  for (const DeviceResource& device : held) this->backend_->FreeDevice(device);
  // Running out of memory is not a device loss: the server must not reset over it.
  EXPECT_TRUE(TypeParam::DeviceHealth(this->backend_->context()).ok());
}

TYPED_TEST_P(DriverConformanceTest, PinnedBytesGoBackToTheirOwner) {
  {
    Bytes bytes = this->Pinned(100);
    EXPECT_EQ(bytes.size(), 100u);
    EXPECT_TRUE(this->owner_.released().empty());
  }
  ASSERT_EQ(this->owner_.released().size(), 1u);
}

TYPED_TEST_P(DriverConformanceTest, StickyErrorIsReportedUntilTheBackendIsRecreated) {
  using Backend = ConformanceBackend<TypeParam>;
  if constexpr (!requires {
                  Backend::InjectStickyError();
                  Backend::ContextResets();
                }) {
    GTEST_SKIP() << "no way to corrupt this backend's context on purpose";
  } else {
    ASSERT_TRUE(TypeParam::DeviceHealth(this->backend_->context()).ok());
    const DeviceResource device = this->Device(4096);
    Backend::InjectStickyError();
    absl::Status health = TypeParam::DeviceHealth(this->backend_->context());
    EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
    EXPECT_NE(health.message().find("illegal memory access"), std::string::npos)
        << "the driver's own words for the cause: " << health;
    // Nothing pretends to work: not a copy, a synchronize, or an event.
    Bytes out = this->Pinned(4096);
    absl::Status copied = TypeParam::CopyToHost(device, CopyLayout::Contiguous(0, 4096), out,
                                                 this->backend_->stream(0));
    copied.Update(this->backend_->stream(0).Synchronize());
    EXPECT_EQ(copied.code(), absl::StatusCode::kUnavailable) << copied;
    EXPECT_EQ(this->backend_->stream(1).Synchronize().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(this->backend_->stream(0).RecordEvent().Wait().code(),
              absl::StatusCode::kUnavailable);
    // The lost context goes with its backend; a new backend gets a new one, healthy and
    // working.
    const int resets = Backend::ContextResets();
    this->TearDown();
    this->pinned_.clear();
    this->device_.clear();
    this->backend_.reset();
    EXPECT_EQ(Backend::ContextResets(), resets + 1);
    absl::StatusOr<std::unique_ptr<typename TypeParam::Backend>> fresh =
        Backend::Create(this->kCapacityBytes);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    this->backend_ = *std::move(fresh);
    EXPECT_TRUE(TypeParam::DeviceHealth(this->backend_->context()).ok());
    const DeviceResource again = this->Device(4096);
    Bytes data = this->Pinned(4096, this->RandomBytes(4096, 9));
    this->Upload(again, CopyLayout::Contiguous(0, 4096), data);
    EXPECT_EQ(this->Download(again, CopyLayout::Contiguous(0, 4096)), this->Contents(data));
  }
}

REGISTER_TYPED_TEST_SUITE_P(DriverConformanceTest, ContiguousCopiesRoundTrip,
                            PitchedCopiesTouchOnlyTheirRows, RelocationCopyMovesTheBytes,
                            PitchedDeviceCopiesMoveOnlyTheirRows, FillsSetTheirRangeAndNothingElse,
                            BulkCopiesMoveEveryByte, EventsOrderWorkAcrossStreams,
                            EventWaitBlocksUntilPriorWorkCompleted, EventsCallBackOnceTheirWorkRan,
                            OutOfMemoryIsResourceExhaustedAndRecoverable,
                            PinnedBytesGoBackToTheirOwner,
                            StickyErrorIsReportedUntilTheBackendIsRecreated);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_TESTING_DRIVER_CONFORMANCE_H_
