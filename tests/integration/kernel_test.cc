// The kernel suite: real CUDA C++ kernels through the real daemon, each compiled,
// launched on random inputs and compared with a reference computed here. Plus the
// compile and launch rules (errors with logs, skipped launches tainting their outputs,
// argument and shape checks, the disk cache across restarts) and what a faulting kernel
// does: on the CPU driver it takes down only the device's executor process; on a GPU it
// costs the device its context, which is recreated.
//
// One source, one target per driver: kernel_test runs the daemon this build selects (the
// CPU driver by default); kernel_cuda_test and kernel_hip_test are built with
// --config=cuda / --config=hip and skip, saying why, where the machine has no such
// device. GPUCMD_EXPECT_DRIVER, when set, names the driver the daemon must have.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/kernels/kernel_sources.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/random_bytes.h"

namespace gpucmd {
namespace {

using namespace ::gpucmd::kernels;  // NOLINT: the suite's kernel sources

using ::gpucmd::testing::DaemonProcess;
using ::gpucmd::testing::DaemonDriver;
using ::gpucmd::testing::RandomFloats;
using ::gpucmd::testing::ShortTempDir;
using ::testing::HasSubstr;

template <typename T>
std::string ToBytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
std::vector<T> FromBytes(const std::string& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected,
                float tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], tolerance) << "at index " << i;
  }
}

// Reads through a wild pointer: a fault on every driver.
constexpr char kWildPointer[] = R"(
    extern "C" __global__ void wild(float* out) {
      float* p = (float*)0x10;
      out[0] = *p;
    })";

class KernelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_dir_ = new std::string(ShortTempDir() + "/cache");
    driver_ = new std::string(DaemonDriver());
  }

  void SetUp() override {
    if (const char* expected = std::getenv("GPUCMD_EXPECT_DRIVER")) {
      ASSERT_EQ(*driver_, expected) << "gpucmdd was built for another driver";
    }
    StartDaemon();
  }

  static bool OnCpu() { return *driver_ == "cpu"; }

  void StartDaemon() {
    kept_.reset();
    bystander_.reset();
    session_.reset();
    client_.reset();
    daemon_.reset();
    std::string directory = ShortTempDir();
    std::string config = directory + "/gpucmdd.textproto";
    std::ofstream(config) << "cpu { memory_bytes_per_device: " << (256 << 20)
                          << " kernel_timeout_seconds: 5 executor_workers: 2 }\n"
                          << "compile { cache_dir: \"" << *cache_dir_ << "\" }\n";
    absl::StatusOr<DaemonProcess> daemon =
        DaemonProcess::Start({"--listen=unix:" + directory + "/gpucmdd.sock",
                              "--http_listen=127.0.0.1:0", "--config=" + config});
    if (!daemon.ok() && !OnCpu()) {
      for (const char* missing : {"no CUDA driver", "no CUDA device", "no HIP device"}) {
        if (absl::StrContains(daemon.status().message(), missing)) {
          GTEST_SKIP() << "the " << *driver_ << " kernel suite needs a device: "
                       << daemon.status().message();
        }
      }
    }
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    absl::StatusOr<Session> session = client_->OpenSession(0, "kernel-test");
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(*std::move(session));
  }

  std::string MustCompile(const std::string& source, const std::string& entry) {
    absl::StatusOr<v1::CompileResponse> compiled = session_->Compile(source, entry);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    return compiled.ok() ? compiled->kernel_id() : "";
  }

  // Appends a launch of `kernel` on one thread with one int argument, `n`, to `batch`.
  void AddLaunch(v1::SubmitRequest& batch, uint64_t sequence, const std::string& kernel,
                 int32_t n) {
    v1::Command* command = batch.add_commands();
    command->set_sequence(sequence);
    v1::LaunchRequest* launch = command->mutable_launch();
    launch->set_session(session_->token());
    launch->set_kernel_id(kernel);
    *launch->mutable_grid() = MakeDim3(1);
    *launch->mutable_block() = MakeDim3(1);
    *launch->add_args() = Int32Argument(n);
  }

  // Sends `batch` on a Submit call of its own; its answer, a reply per command.
  v1::SubmitResponse SubmitOnce(const v1::SubmitRequest& batch) {
    grpc::ClientContext context;
    auto stream = client_->stub().Submit(&context);
    v1::SubmitResponse replies;
    EXPECT_TRUE(stream->Write(batch));
    EXPECT_TRUE(stream->Read(&replies));
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    EXPECT_EQ(replies.replies_size(), batch.commands_size());
    return replies;
  }

  static void ExpectAllOk(const v1::SubmitResponse& replies) {
    for (const v1::CommandReply& reply : replies.replies()) {
      EXPECT_EQ(reply.status().code(), 0) << reply.sequence() << ": " << reply.status().message();
    }
  }

  template <typename T>
  Buffer Upload(const std::vector<T>& values) {
    absl::StatusOr<Buffer> buffer = session_->Allocate(values.size() * sizeof(T));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(session_->Write(*buffer, 0, ToBytes(values)).ok());
    return *std::move(buffer);
  }

  Buffer Zeros(size_t bytes) {
    absl::StatusOr<Buffer> buffer = session_->Allocate(bytes);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(session_->Write(*buffer, 0, std::string(bytes, '\0')).ok());
    return *std::move(buffer);
  }

  template <typename T>
  std::vector<T> Download(const Buffer& buffer) {
    absl::StatusOr<std::string> bytes = session_->Read(buffer, 0, buffer.size_bytes());
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return FromBytes<T>(bytes.value_or(""));
  }

  // Another session with 16 known bytes on the device, to see what a fault does to it.
  void OpenBystander() {
    absl::StatusOr<Session> other = client_->OpenSession(0, "bystander");
    ASSERT_TRUE(other.ok()) << other.status();
    bystander_.emplace(*std::move(other));
    absl::StatusOr<Buffer> kept = bystander_->Allocate(16);
    ASSERT_TRUE(kept.ok()) << kept.status();
    kept_.emplace(*std::move(kept));
    ASSERT_TRUE(bystander_->Write(*kept_, 0, "bystander-bytes!").ok());
  }

  // Launches 1 + 2 into `out` and expects 3: the device runs kernels.
  void ExpectKernelsRun(const Buffer& out) {
    std::string add = MustCompile(kVectorAdd, "vector_add");
    Buffer a = Upload(std::vector<float>{1}), b = Upload(std::vector<float>{2});
    ASSERT_TRUE(session_->Launch(add, {MakeDim3(1), MakeDim3(1)},
                                 {BufferArgument(a, v1::ACCESS_READ),
                                  BufferArgument(b, v1::ACCESS_READ),
                                  BufferArgument(out, v1::ACCESS_WRITE), Int32Argument(1)})
                    .ok());
    EXPECT_EQ(Download<float>(out)[0], 3.0f);
  }

  static std::string* cache_dir_;
  static std::string* driver_;
  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::optional<Session> session_;
  // Declared after the client: they go before it.
  std::optional<Session> bystander_;
  std::optional<Buffer> kept_;
};

std::string* KernelTest::cache_dir_ = nullptr;
std::string* KernelTest::driver_ = nullptr;


TEST_F(KernelTest, VectorAdd) {
  constexpr int kN = 10000;
  std::vector<float> a = RandomFloats(kN, 1), b = RandomFloats(kN, 2), expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = a[i] + b[i];
  std::string id = MustCompile(kVectorAdd, "vector_add");
  Buffer da = Upload(a), db = Upload(b), dc = Zeros(kN * sizeof(float));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kN + 255) / 256), MakeDim3(256)},
                               {BufferArgument(da, v1::ACCESS_READ),
                                BufferArgument(db, v1::ACCESS_READ),
                                BufferArgument(dc, v1::ACCESS_WRITE), Int32Argument(kN)})
                  .ok());
  ExpectNear(Download<float>(dc), expected, 0.0f);
}

TEST_F(KernelTest, Saxpy) {
  constexpr int kN = 5000;
  const float alpha = 2.5f;
  std::vector<float> x = RandomFloats(kN, 3), y = RandomFloats(kN, 4), expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = alpha * x[i] + y[i];
  std::string id = MustCompile(kSaxpy, "saxpy");
  Buffer dx = Upload(x), dy = Upload(y);
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(8), MakeDim3(128)},
                               {Int32Argument(kN), FloatArgument(alpha),
                                BufferArgument(dx, v1::ACCESS_READ),
                                BufferArgument(dy, v1::ACCESS_READ_WRITE)})
                  .ok());
  ExpectNear(Download<float>(dy), expected, 1e-6f);
}

TEST_F(KernelTest, TiledMatrixMultiplyWithSharedMemoryAndBarriers) {
  constexpr int kM = 48, kK = 40, kN = 36, kTile = 16;
  std::vector<float> a = RandomFloats(kM * kK, 5), b = RandomFloats(kK * kN, 6);
  std::vector<float> expected(kM * kN, 0.0f);
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j)
      for (int k = 0; k < kK; ++k) expected[i * kN + j] += a[i * kK + k] * b[k * kN + j];
  std::string id = MustCompile(kTiledMatmul, "matmul");
  Buffer da = Upload(a), db = Upload(b), dc = Zeros(kM * kN * sizeof(float));
  ASSERT_TRUE(session_->Launch(id,
                               {MakeDim3((kN + kTile - 1) / kTile, (kM + kTile - 1) / kTile),
                                MakeDim3(kTile, kTile)},
                               {BufferArgument(da, v1::ACCESS_READ),
                                BufferArgument(db, v1::ACCESS_READ),
                                BufferArgument(dc, v1::ACCESS_WRITE), Int32Argument(kM),
                                Int32Argument(kK), Int32Argument(kN)})
                  .ok());
  ExpectNear(Download<float>(dc), expected, 1e-4f);
}

TEST_F(KernelTest, BlockReductionWithSharedMemoryAndAGlobalAtomic) {
  constexpr int kN = 40000;
  std::vector<int> values(kN);
  std::mt19937 random(7);
  long long expected = 0;
  for (int& value : values) {
    value = static_cast<int>(random() % 1000) - 500;
    expected += value;
  }
  std::string id = MustCompile(kBlockReduce, "reduce_sum");
  Buffer in = Upload(values), total = Zeros(sizeof(uint64_t));
  constexpr int kBlock = 256;
  ASSERT_TRUE(session_->Launch(id,
                               {MakeDim3((kN + 2 * kBlock - 1) / (2 * kBlock)), MakeDim3(kBlock),
                                kBlock * sizeof(int)},
                               {BufferArgument(in, v1::ACCESS_READ), Int32Argument(kN),
                                BufferArgument(total, v1::ACCESS_READ_WRITE)})
                  .ok());
  EXPECT_EQ(static_cast<long long>(Download<uint64_t>(total)[0]), expected);
}

TEST_F(KernelTest, InclusiveScan) {
  constexpr int kN = 1024;  // one block, Hillis-Steele with double buffering
  std::vector<float> values = RandomFloats(kN, 8), expected(kN);
  double running = 0;
  for (int i = 0; i < kN; ++i) expected[i] = static_cast<float>(running += values[i]);
  std::string id = MustCompile(kInclusiveScan, "inclusive_scan");
  Buffer in = Upload(values), out = Zeros(kN * sizeof(float));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(1), MakeDim3(kN), 2 * kN * sizeof(float)},
                               {BufferArgument(in, v1::ACCESS_READ),
                                BufferArgument(out, v1::ACCESS_WRITE), Int32Argument(kN)})
                  .ok());
  ExpectNear(Download<float>(out), expected, 1e-3f);
}

TEST_F(KernelTest, HistogramWithSharedAndGlobalAtomics) {
  constexpr int kN = 200000;
  std::vector<unsigned char> data(kN);
  std::mt19937 random(9);
  std::vector<unsigned> expected(256, 0);
  for (unsigned char& byte : data) {
    byte = static_cast<unsigned char>(random() % 256);
    ++expected[byte];
  }
  std::string id = MustCompile(kHistogram, "histogram");
  Buffer in = Upload(data), bins = Zeros(256 * sizeof(unsigned));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(16), MakeDim3(128)},
                               {BufferArgument(in, v1::ACCESS_READ), Int32Argument(kN),
                                BufferArgument(bins, v1::ACCESS_READ_WRITE)})
                  .ok());
  EXPECT_EQ(Download<unsigned>(bins), expected);
}

TEST_F(KernelTest, FivePointStencilOnAPitchedBuffer) {
  constexpr int kWidth = 50, kHeight = 30, kPitchFloats = 64;
  std::vector<float> grid = RandomFloats(kWidth * kHeight, 10);
  std::vector<float> expected(kWidth * kHeight, 0.0f);
  for (int y = 1; y < kHeight - 1; ++y)
    for (int x = 1; x < kWidth - 1; ++x)
      expected[y * kWidth + x] = 0.5f * grid[y * kWidth + x] +
                                 0.125f * (grid[(y - 1) * kWidth + x] + grid[(y + 1) * kWidth + x] +
                                           grid[y * kWidth + x - 1] + grid[y * kWidth + x + 1]);
  std::string id = MustCompile(kStencil, "stencil");
  constexpr uint64_t kPitchBytes = kPitchFloats * sizeof(float);
  Pitched pitched{.width_bytes = kWidth * sizeof(float), .height = kHeight,
                  .stride_bytes = kPitchBytes};
  Buffer in = Zeros(kPitchBytes * kHeight), out = Zeros(kPitchBytes * kHeight);
  ASSERT_TRUE(session_->Write(in, 0, ToBytes(grid), 0, pitched).ok());
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kWidth + 15) / 16, (kHeight + 15) / 16),
                                    MakeDim3(16, 16)},
                               {BufferArgument(in, v1::ACCESS_READ),
                                BufferArgument(out, v1::ACCESS_WRITE), Int32Argument(kWidth),
                                Int32Argument(kHeight), UInt64Argument(kPitchBytes)})
                  .ok());
  absl::StatusOr<std::string> result = session_->ReadPitched(out, 0, pitched);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectNear(FromBytes<float>(*result), expected, 1e-6f);
}

TEST_F(KernelTest, FloatAndDoubleAtomicAddAccumulateWithCudasOverloads) {
  constexpr int kN = 5003;  // not a multiple of the block size
  std::vector<float> x = RandomFloats(kN, 11);
  double expected = 0;
  for (float value : x) expected += value;
  std::string id = MustCompile(kAtomicAccumulate, "accumulate");
  Buffer dx = Upload(x), float_sum = Zeros(sizeof(float)), double_sum = Zeros(sizeof(double)),
         count = Zeros(sizeof(unsigned)), last = Zeros(sizeof(int));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kN + 127) / 128), MakeDim3(128)},
                               {BufferArgument(dx, v1::ACCESS_READ), Int32Argument(kN),
                                BufferArgument(float_sum, v1::ACCESS_READ_WRITE),
                                BufferArgument(double_sum, v1::ACCESS_READ_WRITE),
                                BufferArgument(count, v1::ACCESS_READ_WRITE),
                                BufferArgument(last, v1::ACCESS_READ_WRITE)})
                  .ok());
  EXPECT_NEAR(Download<float>(float_sum)[0], expected, 1e-2);
  EXPECT_NEAR(Download<double>(double_sum)[0], expected, 1e-9);
  EXPECT_EQ(Download<unsigned>(count)[0], static_cast<unsigned>(kN));
  EXPECT_EQ(Download<int>(last)[0], kN - 1);
}

TEST_F(KernelTest, AtomicIncHandsOutARingOfSlots) {
  constexpr int kN = 1000;
  constexpr unsigned kLimit = 6;  // slots 0..6
  std::string id = MustCompile(kRingCounter, "ring");
  Buffer counter = Zeros(sizeof(unsigned)), hits = Zeros((kLimit + 1) * sizeof(unsigned));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kN + 63) / 64), MakeDim3(64)},
                               {BufferArgument(counter, v1::ACCESS_READ_WRITE),
                                UInt32Argument(kLimit),
                                BufferArgument(hits, v1::ACCESS_READ_WRITE), Int32Argument(kN)})
                  .ok());
  EXPECT_EQ(Download<unsigned>(counter)[0], kN % (kLimit + 1));
  std::vector<unsigned> got = Download<unsigned>(hits);
  for (unsigned slot = 0; slot <= kLimit; ++slot) {
    EXPECT_EQ(got[slot], kN / (kLimit + 1) + (slot < kN % (kLimit + 1) ? 1u : 0u)) << slot;
  }
}

TEST_F(KernelTest, Float4VectorisedCopyWithATail) {
  constexpr int kN = 4099;  // three floats past the last float4
  std::vector<float> in = RandomFloats(kN, 12), expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = 2.0f * in[i];
  std::string id = MustCompile(kFloat4Copy, "double_float4");
  Buffer din = Upload(in), dout = Zeros(kN * sizeof(float));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kN / 4 + 255) / 256), MakeDim3(256)},
                               {BufferArgument(din, v1::ACCESS_READ),
                                BufferArgument(dout, v1::ACCESS_WRITE), Int32Argument(kN)})
                  .ok());
  ExpectNear(Download<float>(dout), expected, 0.0f);
}

TEST_F(KernelTest, IntegerIntrinsicsMatchTheirDefinitions) {
  std::mt19937 random(13);
  std::vector<unsigned> in = {0u, 1u, 0x80000000u, 0xffffffffu, 0x00ffffffu, 0x00800000u};
  while (in.size() < 301) in.push_back(random());
  const int n = static_cast<int>(in.size());
  std::vector<int> counts(4 * n);
  std::vector<unsigned> mixed(3 * n);
  for (int i = 0; i < n; ++i) {
    const unsigned v = in[i];
    int leading = 0;
    while (leading < 32 && !(v & (0x80000000u >> leading))) ++leading;
    int first = 0;
    while (first < 32 && !(v & (1u << first))) ++first;
    unsigned reversed = 0;
    for (int b = 0; b < 32; ++b) reversed |= ((v >> b) & 1u) << (31 - b);
    // The low 24 bits, as a signed number.
    const int64_t low24 = static_cast<int64_t>(v & 0xffffffu) - ((v & 0x800000u) ? (1 << 24) : 0);
    counts[4 * i + 0] = __builtin_popcount(v);
    counts[4 * i + 1] = leading;
    counts[4 * i + 2] = v == 0 ? 0 : first + 1;
    counts[4 * i + 3] = static_cast<int>(static_cast<uint32_t>(low24 * -3));
    mixed[3 * i + 0] = reversed;
    mixed[3 * i + 1] = (v & 0xffffffu) * ((v >> 8) & 0xffffffu);
    mixed[3 * i + 2] = static_cast<unsigned>((uint64_t{v} * 0x9e3779b9u) >> 32);
  }
  std::string id = MustCompile(kBitIntrinsics, "bits");
  Buffer din = Upload(in), dcounts = Zeros(counts.size() * sizeof(int)),
         dmixed = Zeros(mixed.size() * sizeof(unsigned));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((n + 127) / 128), MakeDim3(128)},
                               {BufferArgument(din, v1::ACCESS_READ), Int32Argument(n),
                                BufferArgument(dcounts, v1::ACCESS_WRITE),
                                BufferArgument(dmixed, v1::ACCESS_WRITE)})
                  .ok());
  EXPECT_EQ(Download<int>(dcounts), counts);
  EXPECT_EQ(Download<unsigned>(dmixed), mixed);
}

TEST_F(KernelTest, TheOtherAtomicsIntrinsicsAndVectorTypes) {
  std::string id = MustCompile(kAtomicsAndIntrinsics, "mixed");
  Buffer dec = Zeros(sizeof(unsigned)), cas16 = Zeros(sizeof(uint16_t)),
         exch = Zeros(sizeof(float)), min64 = Zeros(sizeof(int64_t)),
         masks = Upload(std::vector<unsigned>{0u, 0xffffffffu, 0u}),
         wide = Zeros(9 * sizeof(uint64_t));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(1), MakeDim3(64)},
                               {BufferArgument(dec, v1::ACCESS_READ_WRITE),
                                BufferArgument(cas16, v1::ACCESS_READ_WRITE),
                                BufferArgument(exch, v1::ACCESS_READ_WRITE),
                                BufferArgument(min64, v1::ACCESS_READ_WRITE),
                                BufferArgument(masks, v1::ACCESS_READ_WRITE),
                                BufferArgument(wide, v1::ACCESS_READ_WRITE)})
                  .ok());
  // 64 decrements from 0 on a ring of 0..5 (0 -> 5 -> 4 ... -> 0): 64 mod 6 = 4 steps.
  EXPECT_EQ(Download<unsigned>(dec)[0], 2u);
  EXPECT_EQ(Download<uint16_t>(cas16)[0], 64);
  EXPECT_EQ(Download<float>(exch)[0], 2.5f);
  EXPECT_EQ(Download<int64_t>(min64)[0], -63'000'000'000LL);
  EXPECT_EQ(Download<unsigned>(masks), (std::vector<unsigned>{0xffffffffu, 0u, 0u}));
  const std::vector<uint64_t> expected = {
      64,                                      // atomicAdd_block
      2016,                                    // atomicAdd_system of 0..63
      2,                                       // __umul64hi(2^64 - 1, 3)
      0xffffffffffffffffull,                   // __mul64hi(-1, 5)
      32 + 100 * 63 + 10000 * 41,              // __popcll, __clzll, __ffsll
      uint64_t{1} << 63,                       // __brevll(1)
      0x3f800000ull + 7,                       // bit casts there and back
      37,                                      // 3.5 * 8 + 7 + 2 (2.5 rounds to even) + 0.5
      13};                                     // make_char4, make_double2
  EXPECT_EQ(Download<uint64_t>(wide), expected);
}

std::vector<int> RandomInts(size_t count, uint32_t seed, int low, int high) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> uniform(low, high);
  std::vector<int> values(count);
  for (int& value : values) value = uniform(random);
  return values;
}

TEST_F(KernelTest, WarpShuffleScanAndReductionOverPartialWarps) {
  constexpr int kN = 1234, kBlock = 100;  // blocks end in a warp of 4 lanes
  constexpr int kBlocks = (kN + kBlock - 1) / kBlock, kWarpsPerBlock = (kBlock + 31) / 32;
  std::vector<int> in = RandomInts(kN, 21, -50, 50);
  std::vector<int> scan(kN), sums(kBlocks * kWarpsPerBlock, 0);
  for (int i = 0; i < kBlocks * kBlock; ++i) {
    const int block = i / kBlock, thread = i % kBlock, warp = thread / 32;
    const int value = i < kN ? in[i] : 0;
    sums[block * kWarpsPerBlock + warp] += value;
    if (i < kN) scan[i] = (thread % 32 == 0 ? 0 : scan[i - 1]) + value;
  }
  std::string id = MustCompile(kWarpScanReduce, "warp_scan_reduce");
  Buffer din = Upload(in), dscan = Zeros(kN * sizeof(int)),
         dsums = Zeros(sums.size() * sizeof(int));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(kBlocks), MakeDim3(kBlock)},
                               {BufferArgument(din, v1::ACCESS_READ), Int32Argument(kN),
                                BufferArgument(dscan, v1::ACCESS_WRITE),
                                BufferArgument(dsums, v1::ACCESS_WRITE)})
                  .ok());
  EXPECT_EQ(Download<int>(dscan), scan);
  EXPECT_EQ(Download<int>(dsums), sums);
}

TEST_F(KernelTest, WarpSumsThroughADeviceTemplateMeetAtTheShuffles) {
  constexpr int kBlocks = 3, kBlock = 64, kWarps = kBlocks * kBlock / 32;
  std::vector<int> in = RandomInts(kBlocks * kBlock, 31, -50, 50);
  std::vector<int> int_sums(kWarps, 0);
  std::vector<float> float_sums(kWarps, 0.0f);
  for (int i = 0; i < kBlocks * kBlock; ++i) {
    int_sums[i / 32] += in[i];
    float_sums[i / 32] += static_cast<float>(in[i]) * 0.5f;
  }
  std::string id = MustCompile(kTemplatedWarpSums, "warp_sums");
  Buffer din = Upload(in), dints = Zeros(kWarps * sizeof(int)),
         dfloats = Zeros(kWarps * sizeof(float));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(kBlocks), MakeDim3(kBlock)},
                   {BufferArgument(din, v1::ACCESS_READ), BufferArgument(dints, v1::ACCESS_WRITE),
                    BufferArgument(dfloats, v1::ACCESS_WRITE)})
          .ok());
  EXPECT_EQ(Download<int>(dints), int_sums);
  EXPECT_EQ(Download<float>(dfloats), float_sums);  // halves of small ints: exact
}

TEST_F(KernelTest, HostCodeInAKernelsSourceIsRefusedNamingIt) {
  for (const HostCode& c : kHostCode) {
    absl::StatusOr<v1::CompileResponse> compiled = session_->Compile(c.source, "k");
    EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument) << c.source;
    EXPECT_THAT(std::string(compiled.status().message()),
                HasSubstr(absl::StrCat("kernel.cu:", c.line, ": ", c.refusal)))
        << c.source;
  }
  ExpectKernelsRun(Zeros(sizeof(float)));  // the refusals cost the device nothing
}

TEST_F(KernelTest, DeviceCodeOfEveryKindRuns) {
  // d = {x, y, ., z}: a = (x, y), c = 2 (a + a) = 4a, and d[2] = (c . a)^2 + sqrt(z) +
  // tile(4) + kLanes + kHalf + kOffsets[1] + kWeights[0] + 0 + 0 (the Box of zero) +
  // kScale<float> + one + two.
  std::string id = MustCompile(kDeviceCodeOfEveryKind, "device_code");
  Buffer data = Upload(std::vector<float>{1.0f, 2.0f, 0.0f, 16.0f});
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(1), MakeDim3(1)}, {BufferArgument(data, v1::ACCESS_READ_WRITE)})
          .ok());
  EXPECT_EQ(Download<float>(data)[2],
            400.0f + 4.0f + 32.0f + 2.0f + 0.5f + 2.0f + 0.25f + 3.0f + 1.0f + 2.0f);
}

TEST_F(KernelTest, BallotStreamCompactionKeepsEveryPositiveValueOnce) {
  constexpr int kN = 3001;
  std::vector<int> in = RandomInts(kN, 22, -100, 100);
  std::vector<int> kept;
  for (int value : in) {
    if (value > 0) kept.push_back(value);
  }
  std::string id = MustCompile(kBallotCompaction, "compact_positive");
  Buffer din = Upload(in), dout = Zeros(kN * sizeof(int)), count = Zeros(sizeof(unsigned));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kN + 127) / 128), MakeDim3(128)},
                               {BufferArgument(din, v1::ACCESS_READ), Int32Argument(kN),
                                BufferArgument(dout, v1::ACCESS_WRITE),
                                BufferArgument(count, v1::ACCESS_READ_WRITE)})
                  .ok());
  ASSERT_EQ(Download<unsigned>(count)[0], kept.size());
  std::vector<int> out = Download<int>(dout);
  out.resize(kept.size());
  std::sort(out.begin(), out.end());
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(out, kept) << "warps' order may differ, not their values";
}

TEST_F(KernelTest, WarpVotesMatchesAndShufflesWithAWidth) {
  constexpr int kThreads = 64;
  std::vector<int> in = RandomInts(kThreads, 23, 0, 99);
  std::vector<unsigned> expected(6 * kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const int warp = t / 32 * 32, lane = t % 32;
    bool any = false, all = true;
    unsigned match = 0, ballot = 0;
    for (int l = 0; l < 32; ++l) {
      any = any || in[warp + l] > 90;
      all = all && in[warp + l] >= 0;
      if (in[warp + l] % 4 == in[t] % 4) match |= 1u << l;
      if (l < 16 && (in[warp + l] & 1)) ballot |= 1u << l;
    }
    expected[6 * t + 0] = any;
    expected[6 * t + 1] = all;
    expected[6 * t + 2] = match;
    expected[6 * t + 3] = static_cast<unsigned>(in[warp + lane / 8 * 8 + 3]);
    expected[6 * t + 4] = static_cast<unsigned>(in[warp + (lane ^ 1)]);
    expected[6 * t + 5] = lane < 16 ? ballot : 0u;
  }
  std::string id = MustCompile(kWarpVotes, "votes");
  Buffer din = Upload(in), dout = Zeros(expected.size() * sizeof(unsigned));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(1), MakeDim3(kThreads)},
                               {BufferArgument(din, v1::ACCESS_READ),
                                BufferArgument(dout, v1::ACCESS_WRITE)})
                  .ok());
  EXPECT_EQ(Download<unsigned>(dout), expected);
}

TEST_F(KernelTest, CooperativeGroupsTilesReduceAndVote) {
  constexpr int kN = 1000, kBlock = 128, kTile = 16;  // the last block is part empty
  constexpr int kBlocks = (kN + kBlock - 1) / kBlock, kTiles = kBlocks * kBlock / kTile;
  std::vector<float> in = RandomFloats(kN, 24);
  std::vector<float> block_sums(kBlocks, 0.0f);
  std::vector<int> tile_max(kTiles, -1000000);
  std::vector<unsigned> tile_votes(kTiles, 0);
  for (int i = 0; i < kN; ++i) {
    block_sums[i / kBlock] += in[i];
    tile_max[i / kTile] = std::max(tile_max[i / kTile], static_cast<int>(in[i] * 1000.0f));
    if (in[i] > 0.0f) tile_votes[i / kTile] |= 1u << (i % kTile);
  }
  std::string id = MustCompile(kTiledReduction, "tile_reduce");
  Buffer din = Upload(in), dsums = Zeros(kBlocks * sizeof(float)),
         dmax = Zeros(kTiles * sizeof(int)), dvotes = Zeros(kTiles * sizeof(unsigned));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(kBlocks), MakeDim3(kBlock)},
                               {BufferArgument(din, v1::ACCESS_READ), Int32Argument(kN),
                                BufferArgument(dsums, v1::ACCESS_WRITE),
                                BufferArgument(dmax, v1::ACCESS_WRITE),
                                BufferArgument(dvotes, v1::ACCESS_WRITE)})
                  .ok());
  ExpectNear(Download<float>(dsums), block_sums, 1e-3f);
  EXPECT_EQ(Download<int>(dmax), tile_max);
  EXPECT_EQ(Download<unsigned>(dvotes), tile_votes);
}

// The binary16 bits of `value`, which must be a normal half or +0 (a multiple of 1/64
// within +-4 is, and so is 40000).
uint16_t HalfBits(float value) {
  if (value == 0.0f) return 0;
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return static_cast<uint16_t>(((bits >> 16) & 0x8000u) |
                               ((((bits >> 23) & 0xffu) - 112u) << 10) | ((bits >> 13) & 0x3ffu));
}

// The value of binary16 bits (normal, subnormal or zero).
float HalfValue(uint16_t bits) {
  const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const float mantissa = static_cast<float>(bits & 0x3ffu);
  if (exponent == 0) return sign * mantissa * std::ldexp(1.0f, -24);
  return sign * std::ldexp(1.0f + mantissa / 1024.0f, exponent - 15);
}

TEST_F(KernelTest, HalfPrecisionProductsAndTheirSum) {
  constexpr int kN = 999;  // one element past the last __half2
  std::mt19937 random(25);
  std::uniform_int_distribution<int> sixty_fourths(-128, 128);
  std::vector<uint16_t> a(kN), b(kN);
  double dot = 0;
  for (int i = 0; i < kN; ++i) {
    const float x = sixty_fourths(random) / 64.0f, y = sixty_fourths(random) / 64.0f;
    a[i] = HalfBits(x);
    b[i] = HalfBits(y);
    dot += x * y;
  }
  std::string id = MustCompile(kHalfDot, "half_dot");
  Buffer da = Upload(a), db = Upload(b), ddot = Zeros(sizeof(float)),
         dproducts = Zeros(kN * sizeof(uint16_t));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kN / 2 + 64) / 64), MakeDim3(64)},
                               {BufferArgument(da, v1::ACCESS_READ),
                                BufferArgument(db, v1::ACCESS_READ), Int32Argument(kN),
                                BufferArgument(ddot, v1::ACCESS_READ_WRITE),
                                BufferArgument(dproducts, v1::ACCESS_WRITE)})
                  .ok());
  // Each product rounds to the nearest half: within half the spacing of halves there
  // (2^-10 of the power of two below it; 2^-24 among the subnormals).
  std::vector<uint16_t> products = Download<uint16_t>(dproducts);
  for (int i = 0; i < kN; ++i) {
    const float exact = HalfValue(a[i]) * HalfValue(b[i]);
    const float spacing = std::fabs(exact) < std::ldexp(1.0f, -14)
                              ? std::ldexp(1.0f, -24)
                              : std::ldexp(1.0f, std::ilogb(exact) - 10);
    EXPECT_NEAR(HalfValue(products[i]), exact, spacing / 2) << "element " << i;
  }
  EXPECT_NEAR(Download<float>(ddot)[0], dot, 1e-2);
}

// __half made from floats and ints by conversion and used as a float, as real kernels
// write it (kHalfConversions): on halves whose arithmetic here is exact, and on an
// overflow to infinity, a NaN and both zeros.
TEST_F(KernelTest, HalfConvertsLikeCudasHalf) {
  std::mt19937 random(31);
  std::uniform_int_distribution<int> sixty_fourths(-256, 256);
  std::vector<float> in;
  for (int i = 0; i < 329; ++i) in.push_back(sixty_fourths(random) / 64.0f);
  const float nan = std::nanf("");
  for (float special : {40000.0f, nan, 0.0f, -0.0f}) in.push_back(special);
  const int n = static_cast<int>(in.size());  // 333: the last block is partial
  std::string id = MustCompile(kHalfConversions, "half_conversions");
  Buffer din = Upload(in), dout = Zeros(8 * n * sizeof(float));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((n + 63) / 64), MakeDim3(64)},
                               {BufferArgument(din, v1::ACCESS_READ),
                                BufferArgument(dout, v1::ACCESS_WRITE), Int32Argument(n)})
                  .ok());
  const std::vector<float> out = Download<float>(dout);
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    const float x = in[i];
    const float* got = &out[8 * i];
    SCOPED_TRACE(::testing::Message() << "element " << i << ", " << x);
    if (std::isnan(x)) {
      for (int k : {0, 1, 2, 6}) EXPECT_TRUE(std::isnan(got[k])) << k;
      EXPECT_EQ(got[3], 1.0f) << "a NaN is unequal to everything";
      EXPECT_EQ(got[4], 1.0f) << "a NaN loses to a number";
      const auto bits = static_cast<uint16_t>(got[5]);
      EXPECT_TRUE((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0) << bits;
      EXPECT_EQ(got[7], 1.0f);
      continue;
    }
    const bool overflows = x == 40000.0f;
    EXPECT_EQ(got[0], x);
    EXPECT_EQ(got[1], overflows ? inf : 2 * x);
    EXPECT_EQ(got[2], overflows ? inf : 2.5f * x);
    const float flags = x > 0 ? 1 + 2 + 8 + 16 : x < 0 ? 1 + 4 + 8 + 32 : 2 + 4 + 8;
    EXPECT_EQ(got[3], flags);
    EXPECT_EQ(got[4], std::max(x, 1.0f));
    EXPECT_EQ(got[5], x == 0 ? (std::signbit(x) ? 0x8000 : 0) : HalfBits(x));
    EXPECT_EQ(got[6], -x);
    EXPECT_EQ(got[7], overflows ? 2.0f : 0.0f);
  }
}

TEST_F(KernelTest, BitonicSortInFileScopeDynamicSharedMemory) {
  constexpr uint32_t kN = 1000, kBlock = 256;  // the last block is partial
  std::mt19937 random(13);
  std::vector<uint32_t> keys(kN);
  for (uint32_t& key : keys) key = static_cast<uint32_t>(random());
  std::vector<uint32_t> expected = keys;
  for (uint32_t begin = 0; begin < kN; begin += kBlock) {
    std::sort(expected.begin() + begin, expected.begin() + std::min(begin + kBlock, kN));
  }
  std::string id = MustCompile(kBitonicSort, "bitonic_sort");
  Buffer dkeys = Upload(keys);
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kN + kBlock - 1) / kBlock), MakeDim3(kBlock),
                                    kBlock * sizeof(uint32_t)},
                               {BufferArgument(dkeys, v1::ACCESS_READ_WRITE),
                                UInt32Argument(kN), Int32Argument(0)})
                  .ok());
  EXPECT_EQ(Download<uint32_t>(dkeys), expected);
}

TEST_F(KernelTest, BlockWideCountsAnyAndAll) {
  constexpr int kN = 1000, kBlock = 256, kBlocks = (kN + kBlock - 1) / kBlock;
  std::mt19937 random(14);
  std::vector<int> in(kN);
  for (int& value : in) value = static_cast<int>(random() % 11) - 5;
  std::fill(in.begin(), in.begin() + kBlock, 1);                  // block 0: all positive
  std::fill(in.begin() + kBlock, in.begin() + 2 * kBlock, -1);    // block 1: none
  std::vector<int> expected(4 * kBlocks, 0);
  for (int block = 0; block < kBlocks; ++block) {
    int count = 0;
    for (int t = 0; t < kBlock; ++t) {
      const int i = block * kBlock + t;
      count += i < kN && in[i] > 0;
    }
    expected[4 * block] = count;
    expected[4 * block + 1] = count > 0;
    expected[4 * block + 2] = count == kBlock;
    expected[4 * block + 3] = count;
  }
  std::string id = MustCompile(kBlockVotes, "block_votes");
  Buffer din = Upload(in), dcounts = Zeros(expected.size() * sizeof(int));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(kBlocks), MakeDim3(kBlock), kBlock * sizeof(int)},
                               {BufferArgument(din, v1::ACCESS_READ), Int32Argument(kN),
                                BufferArgument(dcounts, v1::ACCESS_WRITE)})
                  .ok());
  EXPECT_EQ(Download<int>(dcounts), expected);
}

// The nearest bfloat16 to `value` (ties to even), as its bits.
uint16_t Bfloat16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float Bfloat16Value(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

TEST_F(KernelTest, Bfloat16AxpyRoundsEachResult) {
  constexpr int kN = 1001;
  constexpr float kA = 1.75f;
  std::vector<float> xs = RandomFloats(kN, 15), ys = RandomFloats(kN, 16);
  std::vector<uint16_t> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = Bfloat16Bits(xs[i] * 100);
    y[i] = Bfloat16Bits(ys[i] * 100);
  }
  std::string id = MustCompile(kBfloat16Axpy, "bf16_axpy");
  Buffer dx = Upload(x), dy = Upload(y);
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((kN + 127) / 128), MakeDim3(128)},
                               {Int32Argument(kN), FloatArgument(kA),
                                BufferArgument(dx, v1::ACCESS_READ),
                                BufferArgument(dy, v1::ACCESS_READ_WRITE)})
                  .ok());
  std::vector<uint16_t> result = Download<uint16_t>(dy);
  for (int i = 0; i < kN; ++i) {
    const float exact = kA * Bfloat16Value(x[i]) + Bfloat16Value(y[i]);
    // The nearest bfloat16: within half its spacing there (8 significant bits); a GPU
    // that fuses the multiply-add may land on the other neighbour of a near-tie.
    const float spacing = std::ldexp(1.0f, std::ilogb(exact) - 7);
    EXPECT_NEAR(Bfloat16Value(result[i]), exact, OnCpu() ? spacing / 2 : spacing)
        << "element " << i;
    if (OnCpu()) {
      EXPECT_EQ(result[i], Bfloat16Bits(exact)) << "element " << i;
    }
  }
}

TEST_F(KernelTest, MathLibraryBeyondC) {
  std::vector<float> in = RandomFloats(200, 17);
  for (float& x : in) x *= 4;
  for (float exact : {0.0f, 1.0f, 2.0f, -3.0f, 0.5f, 1.5f, -2.5f}) in.push_back(exact);
  const int n = static_cast<int>(in.size());
  std::string id = MustCompile(kMathExtras, "math_extras");
  Buffer din = Upload(in), dout = Zeros(7 * in.size() * sizeof(float));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3((n + 63) / 64), MakeDim3(64)},
                               {BufferArgument(din, v1::ACCESS_READ), Int32Argument(n),
                                BufferArgument(dout, v1::ACCESS_WRITE)})
                  .ok());
  std::vector<float> out = Download<float>(dout);
  for (int i = 0; i < n; ++i) {
    const double x = in[i];
    const double expected[7] = {std::sin(x),
                                std::cos(x),
                                std::sin(M_PI * x),
                                std::cos(M_PI * x),
                                1 / std::sqrt(x * x + 13),
                                1 / std::hypot(x, 1.5) + 0.5 * std::erfc(-x / std::sqrt(2.0)),
                                std::tan(x / 4)};
    for (int k = 0; k < 7; ++k) {
      EXPECT_NEAR(out[7 * i + k], expected[k], 1e-5 + 2e-6 * std::fabs(expected[k]))
          << "function " << k << " of " << x;
    }
  }
  // sinpi and cospi are exact at the integers and half-integers, as CUDA's are.
  for (int i = n - 7; i < n; ++i) {
    const float x = in[i];
    if (x == std::floor(x)) {
      EXPECT_EQ(out[7 * i + 2], 0.0f) << "sinpif(" << x << ")";
    } else {
      EXPECT_EQ(out[7 * i + 3], 0.0f) << "cospif(" << x << ")";
    }
  }
}

TEST_F(KernelTest, MoreIntrinsicsGiveCudasResults) {
  std::string id = MustCompile(kMoreIntrinsics, "more_intrinsics");
  Buffer in = Upload(std::vector<float>{1.0f, 3.0f, 2.0f, 0.5f});
  Buffer din = Upload(std::vector<double>{1.0, 3.0, 2.0, 0.5});
  Buffer u = Zeros(64 * sizeof(unsigned)), f = Zeros(64 * sizeof(float));
  Buffer d = Zeros(64 * sizeof(double)), sum = Zeros(8 * sizeof(float));
  ASSERT_TRUE(
      session_
          ->Launch(
              id, {MakeDim3(1), MakeDim3(32)},
              {BufferArgument(in, v1::ACCESS_READ), BufferArgument(din, v1::ACCESS_READ),
               BufferArgument(u, v1::ACCESS_WRITE), BufferArgument(f, v1::ACCESS_WRITE),
               BufferArgument(d, v1::ACCESS_WRITE), BufferArgument(sum, v1::ACCESS_READ_WRITE)})
          .ok());
  const auto i = [](int v) { return static_cast<unsigned>(v); };
  const std::vector<unsigned> expected = {
      0x55441100u, 0x23456789u, 0x23456789u, 0x89abcdefu,
      0x6789abcdu, 0x01234567u,  // bytes
      15u,         8u,          i(-3),       i(-2),
      0x80000000u, 0x80000001u,                      // sums of differences, averages
      i(-499),     1037u,       18u,         i(-7),  // dot products
      0x3ff00000u, 0u,                               // a double's words
      208u,        i(-40),      53u,         0xffffu,
      0u,          0x100u,      496u,              // warp reductions
      3200u,       12u,         8u,          12u,  // dim3, minima and maxima
      0x41000000u};                                // cache-hinted loads: 8.0f
  std::vector<unsigned> ints = Download<unsigned>(u);
  ints.resize(expected.size());
  EXPECT_EQ(ints, expected);

  const std::vector<float> fs = Download<float>(f);
  EXPECT_EQ(fs[0], 0.5f);
  EXPECT_NEAR(std::erf(fs[1]), 0.5, 1e-6);
  EXPECT_NEAR(std::erfc(fs[2]), 0.1, 1e-6);
  EXPECT_NEAR(0.5 * std::erfc(-fs[3] / std::sqrt(2.0)), 0.975, 1e-6);
  EXPECT_NEAR(fs[4], (1.0 - 1.0 / 1800.0) / (30.0 * std::sqrt(M_PI)), 1e-7);
  EXPECT_NEAR(fs[5], 1.2660658777520082, 1e-6);
  EXPECT_NEAR(fs[6], -0.5651591039924851, 1e-6);
  EXPECT_EQ(fs[7], 3.0f);
  EXPECT_EQ(fs[8], 2.0f);
  EXPECT_EQ(fs[9], 0.5f);
  EXPECT_EQ(fs[10], 1.0f);

  const std::vector<double> ds = Download<double>(d);
  EXPECT_EQ(ds[0], 2.0);
  EXPECT_NEAR(std::erfc(-ds[1]) / 1e-6, 1.0, 1e-9);
  EXPECT_NEAR(std::erfc(ds[2]) / 1e-300, 1.0, 1e-9);
  EXPECT_EQ(ds[3], 0.0);
  EXPECT_NEAR(ds[4], std::exp(1.0) * std::erfc(1.0), 1e-15);
  EXPECT_NEAR(ds[5], 2.2795853023360673, 1e-13);
  EXPECT_NEAR(ds[6], 1.5906368546373291, 1e-13);

  EXPECT_EQ(Download<float>(sum),
            (std::vector<float>{32.0f, 64.0f, 0.0f, 0.0f, 32.0f, 64.0f, 96.0f, 128.0f}))
      << "each lane added (1, 2), and (1, 2, 3, 4) to the float4";
}

// Each directed rounding lands on the side of the exact result its name says, one
// float (or double) from the other side's: `below` and `above` straddle `exact`.
template <typename F>
void ExpectStraddle(F below, F above, double exact, const char* what) {
  EXPECT_LE(static_cast<double>(below), exact) << what;
  EXPECT_GE(static_cast<double>(above), exact) << what;
  EXPECT_EQ(std::nextafter(below, above), above) << what;
}

TEST_F(KernelTest, DirectedRoundingsRoundAsNamed) {
  std::string id = MustCompile(kDirectedRoundings, "directed_roundings");
  Buffer in = Upload(std::vector<float>{1.0f, 3.0f, 2.0f, 0.5f});
  Buffer din = Upload(std::vector<double>{1.0, 3.0, 2.0, 0.5});
  Buffer u = Zeros(16 * sizeof(unsigned)), f = Zeros(32 * sizeof(float));
  Buffer d = Zeros(16 * sizeof(double));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(1), MakeDim3(1)},
                   {BufferArgument(in, v1::ACCESS_READ), BufferArgument(din, v1::ACCESS_READ),
                    BufferArgument(u, v1::ACCESS_WRITE), BufferArgument(f, v1::ACCESS_WRITE),
                    BufferArgument(d, v1::ACCESS_WRITE)})
          .ok());
  const auto i = [](int v) { return static_cast<unsigned>(v); };
  // To integers, saturating (3e9 past int, -3 below unsigned, -1e30 below long long).
  const std::vector<unsigned> expected = {
      i(-2), i(-1), 2u, i(-2), 0u, 0x7fffffffu, i(-1), 0xffffffffu, 0x80000000u, 2u, 10000000u, 7u};
  std::vector<unsigned> ints = Download<unsigned>(u);
  ints.resize(expected.size());
  EXPECT_EQ(ints, expected);

  const std::vector<float> fs = Download<float>(f);
  EXPECT_EQ(fs[0], 1.0f);
  EXPECT_EQ(fs[1], std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(fs[2], std::nextafter(-1.0f, -2.0f));
  EXPECT_EQ(fs[3], 1.0f);
  EXPECT_EQ(fs[4], 1.0f) << "3 times 1/3 rounded up lies above 1";
  ExpectStraddle(fs[5], fs[6], 1.0 / 3.0, "__fdiv_rz, __fdiv_ru");
  ExpectStraddle(fs[7], fs[8], std::sqrt(2.0), "__fsqrt_rd, __fsqrt_ru");
  ExpectStraddle(fs[9], fs[10], 1.0 / 3.0, "__frcp_rz, __frcp_ru");
  EXPECT_EQ(fs[11], std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(fs[12], 1.0f);
  EXPECT_EQ(fs[13], 16777216.0f);
  EXPECT_EQ(fs[14], 16777218.0f);
  EXPECT_EQ(fs[15], 4294967040.0f);
  EXPECT_EQ(fs[16], 4294967296.0f);
  ExpectStraddle(fs[17], fs[18], 1.0 / 3.0, "__double2float_rz, __double2float_ru");

  const std::vector<double> ds = Download<double>(d);
  EXPECT_EQ(ds[0], std::nextafter(1.0, 2.0));
  EXPECT_EQ(ds[1], std::nextafter(1.0, 0.0));
  ExpectStraddle(ds[2], ds[3], 1.0 / 3.0, "__ddiv_rd, __ddiv_ru");
  EXPECT_EQ(ds[4], std::nextafter(1.0, 0.0)) << "3 times 1/3 lies below 1";
  ExpectStraddle(ds[5], ds[6], std::sqrt(2.0), "__dsqrt_rd, __dsqrt_ru");
  EXPECT_EQ(ds[7], 1.0 / 3.0);
  EXPECT_EQ(ds[8], std::nextafter(1.0, 2.0));
  EXPECT_EQ(ds[9], 9007199254740992.0);
  EXPECT_EQ(ds[10], 9007199254740994.0);
}

TEST_F(KernelTest, HalfExtrasRoundConvertCompareAndAddAtomically) {
  std::string id = MustCompile(kHalfExtras, "half_extras");
  Buffer in = Upload(std::vector<float>{1.0f, 3.0f});
  Buffer u = Zeros(16 * sizeof(unsigned)), f = Zeros(4 * sizeof(float));
  Buffer h = Zeros(4 * sizeof(uint16_t)), b = Zeros(4 * sizeof(uint16_t));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(1), MakeDim3(32)},
                   {BufferArgument(in, v1::ACCESS_READ), BufferArgument(u, v1::ACCESS_WRITE),
                    BufferArgument(f, v1::ACCESS_WRITE), BufferArgument(h, v1::ACCESS_READ_WRITE),
                    BufferArgument(b, v1::ACCESS_READ_WRITE)})
          .ok());
  const auto i = [](int v) { return static_cast<unsigned>(v); };
  // Halves by their bits (numpy.float16): 1/3 lies between 0x3555 and 0x3556; 65504 is
  // 0x7bff, infinity 0x7c00; 2048 is 0x6800 and the next half, 2050, 0x6801.
  const std::vector<unsigned> expected = {0x3555u, 0x3556u, 0xb556u, 0x7bffu, 0x7c00u, i(-3),
                                          i(-2),   2u,      0u,      0x6800u, 0x6801u, 5u};
  std::vector<unsigned> ints = Download<unsigned>(u);
  ints.resize(expected.size());
  EXPECT_EQ(ints, expected);
  EXPECT_EQ(Download<float>(f), (std::vector<float>{1.0f, 0.0f, 4.0f, 0.0f}));
  // 32 lanes each added 1 (and 0.5): 32 = 0x5000, 16 = 0x4c00; bfloat16 32 = 0x4200,
  // 16 = 0x4180.
  EXPECT_EQ(Download<uint16_t>(h), (std::vector<uint16_t>{0x5000, 0, 0x5000, 0x4c00}));
  EXPECT_EQ(Download<uint16_t>(b), (std::vector<uint16_t>{0x4200, 0, 0x4200, 0x4180}));
}

// libcu++'s headers: atomics through cuda::atomic_ref and cuda::std::atomic_ref, and the
// standard library's types and functions under cuda::std (kLibcudacxx).
TEST_F(KernelTest, LibcudacxxAtomicsAndTypes) {
  constexpr int kN = 256;  // two blocks of 128
  const std::vector<int> in = RandomInts(kN, 47, 0, 999);
  std::string id = MustCompile(kLibcudacxx, "libcudacxx");
  const std::vector<int> initial_tallies = {-1, 1000, 0, 0, -1};
  Buffer din = Upload(in), out = Zeros(3 * kN * sizeof(int));
  Buffer total = Zeros(sizeof(uint64_t)), tallies = Upload(initial_tallies);
  Buffer halves = Zeros(sizeof(float)), spans = Zeros(kN * sizeof(int));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(2), MakeDim3(128)},
                   {BufferArgument(din, v1::ACCESS_READ), BufferArgument(out, v1::ACCESS_WRITE),
                    BufferArgument(total, v1::ACCESS_READ_WRITE),
                    BufferArgument(tallies, v1::ACCESS_READ_WRITE),
                    BufferArgument(halves, v1::ACCESS_READ_WRITE),
                    BufferArgument(spans, v1::ACCESS_WRITE)})
          .ok());
  uint64_t sum = 0;
  for (int v : in) sum += v;
  EXPECT_EQ(Download<uint64_t>(total)[0], sum);
  const int maximum = *std::max_element(in.begin(), in.end());
  EXPECT_EQ(
      Download<int>(tallies),
      (std::vector<int>{maximum, *std::min_element(in.begin(), in.end()), kN, 2 * kN, maximum}));
  EXPECT_EQ(Download<float>(halves)[0], 0.5f * kN);
  const std::vector<int> results = Download<int>(out);
  const std::vector<int> span_results = Download<int>(spans);
  for (int i = 0; i < kN; ++i) {
    const int block = i / 128, thread = i % 128;
    EXPECT_EQ(span_results[i],
              (128 - thread) * 1000000 + in[block * 128 + 1] * 1000 + in[block * 128 + 127])
        << i;
    const int v = in[i], last = v % 10;
    const unsigned bits = static_cast<unsigned>(v);
    const int width = bits == 0 ? 0 : 32 - __builtin_clz(bits);
    EXPECT_EQ(results[3 * i], (v / 100 + v / 10 % 10 + last) * 1000 + __builtin_popcount(bits))
        << i;
    const float as_float = static_cast<float>(v);
    uint32_t float_bits = 0;
    std::memcpy(&float_bits, &as_float, sizeof(float_bits));
    EXPECT_EQ(results[3 * i + 1], (v % 2 == 0 ? v : -1) + 31 + (32 - width) * 10000 +
                                      static_cast<int>(float_bits >> 23) * 1000000)
        << i;
    EXPECT_EQ(results[3 * i + 2],
              last * last - 1 + width * 1000 + __builtin_ctz(bits | 1024u) * 100000)
        << i;
  }
  // A libcu++ header the CPU driver lacks is named in the refusal.
  absl::StatusOr<v1::CompileResponse> missing = session_->Compile(
      "#include <cuda/std/barrier>\nextern \"C\" __global__ void k(int* p) { *p = 1; }\n", "k");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("cuda/std/barrier"));
}

// <math_constants.h>: each CUDART_ constant with the bits CUDA's header gives it.
TEST_F(KernelTest, MathConstantsHaveCudasBits) {
  constexpr size_t kFloats = std::size(kFloatConstantBits);
  constexpr size_t kDoubles = std::size(kDoubleConstantBits);
  std::string id = MustCompile(kMathConstants, "math_constants");
  Buffer f = Zeros(kFloats * sizeof(float)), d = Zeros(kDoubles * sizeof(double));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(1), MakeDim3(1)},
                   {BufferArgument(f, v1::ACCESS_WRITE), BufferArgument(d, v1::ACCESS_WRITE)})
          .ok());
  EXPECT_EQ(Download<uint32_t>(f),
            std::vector<uint32_t>(std::begin(kFloatConstantBits), std::end(kFloatConstantBits)));
  EXPECT_EQ(Download<uint64_t>(d),
            std::vector<uint64_t>(std::begin(kDoubleConstantBits), std::end(kDoubleConstantBits)));
}

// cooperative_groups::memcpy_async and its waits: a block's values staged in shared
// memory, and each tile's first 12 copied over -1s (kGroupCopies).
TEST_F(KernelTest, GroupCopiesLandByTheirWaits) {
  constexpr int kN = 128;  // two blocks of 64
  const std::vector<int> in = RandomInts(kN, 59, 0, 1000);
  std::string id = MustCompile(kGroupCopies, "group_copies");
  Buffer din = Upload(in), reversed = Zeros(kN * sizeof(int)), tiles = Zeros(kN * sizeof(int));
  ASSERT_TRUE(session_
                  ->Launch(id, {MakeDim3(2), MakeDim3(64)},
                           {BufferArgument(din, v1::ACCESS_READ),
                            BufferArgument(reversed, v1::ACCESS_WRITE),
                            BufferArgument(tiles, v1::ACCESS_WRITE)})
                  .ok());
  const std::vector<int> reversed_values = Download<int>(reversed);
  const std::vector<int> tile_values = Download<int>(tiles);
  for (int i = 0; i < kN; ++i) {
    const int block = i / 64, thread = i % 64;
    EXPECT_EQ(reversed_values[i], in[block * 64 + 63 - thread]) << i;
    EXPECT_EQ(tile_values[i], thread % 16 < 12 ? in[i] : -1) << i;
  }
}

// The half and bfloat16 math functions, each on an input whose result both types hold
// exactly (kHalfMath).
TEST_F(KernelTest, HalfMathFunctionsOnBothTypes) {
  const std::vector<float> in = {2.25f,  4.0f, 4.0f, 0.0f,  3.0f,  2.0f,  1.0f, 8.0f,
                                 100.0f, 0.0f, 0.0f, -2.5f, -2.5f, -2.5f, 2.5f};
  const std::vector<float> expected = {1.5f, 0.5f, 0.25f, 1.0f,  8.0f,  100.0f, 0.0f, 3.0f,
                                       2.0f, 0.0f, 1.0f,  -3.0f, -2.0f, -2.0f,  2.0f};
  std::string id = MustCompile(kHalfMath, "half_math");
  Buffer din = Upload(in), out = Zeros(4 * in.size() * sizeof(float));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(1), MakeDim3(static_cast<unsigned>(in.size()))},
                   {BufferArgument(din, v1::ACCESS_READ), BufferArgument(out, v1::ACCESS_WRITE)})
          .ok());
  const std::vector<float> results = Download<float>(out);
  for (size_t t = 0; t < in.size(); ++t) {
    for (int form = 0; form < 4; ++form) {
      EXPECT_EQ(results[4 * t + form], expected[t]) << "function " << t << ", form " << form;
    }
  }
}

// cooperative_groups::this_grid() in a grid-stride loop; its sync() fails the launch,
// which is not cooperative, and the device serves on (kGridStride).
TEST_F(KernelTest, TheGridGroupStridesAndRefusesToSync) {
  constexpr int kN = 1000, kBlocks = 3, kThreads = 64;
  std::string id = MustCompile(kGridStride, "grid_stride");
  Buffer out = Zeros(kN * sizeof(int)), shape = Zeros(5 * sizeof(uint64_t));
  const auto launch = [&](int sync_grid) {
    return session_->Launch(
        id, {MakeDim3(kBlocks), MakeDim3(kThreads)},
        {Int32Argument(sync_grid), Int32Argument(kN), BufferArgument(out, v1::ACCESS_WRITE),
         BufferArgument(shape, v1::ACCESS_WRITE)});
  };
  ASSERT_TRUE(launch(0).ok());
  std::vector<int> doubled(kN);
  for (int i = 0; i < kN; ++i) doubled[i] = 2 * i;
  EXPECT_EQ(Download<int>(out), doubled);
  EXPECT_EQ(Download<uint64_t>(shape),
            (std::vector<uint64_t>{kBlocks * kThreads, kBlocks, 0, kBlocks * kThreads, 2}));
  if (!OnCpu()) return;  // on a GPU, a grid sync in a launch that is not cooperative hangs
  ASSERT_TRUE(launch(1).ok());
  absl::Status synced = session_->Synchronize();
  EXPECT_EQ(synced.code(), absl::StatusCode::kAborted) << synced;
  EXPECT_THAT(std::string(synced.message()), HasSubstr("cooperative launch"));
  out = Zeros(kN * sizeof(int));
  ASSERT_TRUE(launch(0).ok());
  EXPECT_EQ(Download<int>(out), doubled);
}

// __fns as PTX's fns defines it: its documented examples, offset 0, and no such bit.
TEST_F(KernelTest, FindNthSetBitAsPtxDefinesIt) {
  struct Case {
    unsigned mask, base;
    int offset;
    unsigned position;
  };
  const std::vector<Case> cases = {
      {0xaaaaaaaau, 3, 1, 3},
      {0xaaaaaaaau, 3, -1, 3},
      {0xaaaaaaaau, 2, 1, 3},
      {0xaaaaaaaau, 2, -1, 1},
      {0xaaaaaaaau, 2, 0, 0xffffffffu},
      {0xaaaaaaaau, 1, 0, 1},
      {0xf0u, 0, 2, 5},
      {0xf0u, 31, -3, 5},
      {0x1u, 5, 1, 0xffffffffu},
      {0x80000001u, 0, 2, 31},
      {0x80000001u, 31, -2, 0},
      {0xf0u, 7, 2, 0xffffffffu},
  };
  std::vector<unsigned> masks, bases, expected;
  std::vector<int> offsets;
  for (const Case& c : cases) {
    masks.push_back(c.mask);
    bases.push_back(c.base);
    offsets.push_back(c.offset);
    expected.push_back(c.position);
  }
  std::string id = MustCompile(kFindNthSet, "find_nth_set");
  Buffer dmasks = Upload(masks), dbases = Upload(bases), doffsets = Upload(offsets);
  Buffer out = Zeros(cases.size() * sizeof(unsigned));
  ASSERT_TRUE(
      session_
          ->Launch(
              id, {MakeDim3(1), MakeDim3(static_cast<unsigned>(cases.size()))},
              {BufferArgument(dmasks, v1::ACCESS_READ), BufferArgument(dbases, v1::ACCESS_READ),
               BufferArgument(doffsets, v1::ACCESS_READ), BufferArgument(out, v1::ACCESS_WRITE)})
          .ok());
  EXPECT_EQ(Download<unsigned>(out), expected);
}

// The lanes of `word`, `bits` wide, lowest first, sign- or zero-extended.
std::vector<int64_t> SimdLanes(uint32_t word, int bits, bool is_signed) {
  std::vector<int64_t> lanes;
  for (int shift = 0; shift < 32; shift += bits) {
    const int64_t raw = (word >> shift) & ((int64_t{1} << bits) - 1);
    const bool negative = is_signed && raw >= (int64_t{1} << (bits - 1));
    lanes.push_back(negative ? raw - (int64_t{1} << bits) : raw);
  }
  return lanes;
}

// What a SIMD intrinsic makes of its lanes, as PTX's SIMD video instructions define it.
struct SimdReference {
  std::string name;  // without the lane width's digit
  bool is_signed;
  // The result lane of lanes x and y (y is 0 for the intrinsics of one argument) that
  // are `bits` wide, before it is wrapped into the lane; null for the sums of absolute
  // differences, whose result is the sum itself.
  std::function<int64_t(int64_t x, int64_t y, int bits)> lane;

  uint32_t Of(uint32_t a, uint32_t b, int bits) const {
    const std::vector<int64_t> x = SimdLanes(a, bits, is_signed);
    const std::vector<int64_t> y = SimdLanes(b, bits, is_signed);
    uint64_t result = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (lane == nullptr) {
        result += std::abs(x[i] - y[i]);
        continue;
      }
      const uint64_t wrapped =
          static_cast<uint64_t>(lane(x[i], y[i], bits)) & ((uint64_t{1} << bits) - 1);
      result |= wrapped << (bits * i);
    }
    return static_cast<uint32_t>(result);
  }
};

// Every SIMD intrinsic, in kSimdIntrinsics' order: each name for halves (2), then bytes (4).
std::vector<SimdReference> SimdReferences() {
  const auto saturated = [](int64_t value, int bits, bool is_signed) {
    const int64_t lowest = is_signed ? -(int64_t{1} << (bits - 1)) : 0;
    const int64_t highest = is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
    return std::clamp(value, lowest, highest);
  };
  using Lane = std::function<int64_t(int64_t, int64_t, int)>;
  const Lane absolute = [](int64_t x, int64_t, int) { return std::abs(x); };
  const Lane sum = [](int64_t x, int64_t y, int) { return x + y; };
  const Lane difference = [](int64_t x, int64_t y, int) { return x - y; };
  std::vector<SimdReference> references = {
      {"__vabs", true, absolute},
      {"__vabsss", true,
       [&](int64_t x, int64_t, int bits) { return saturated(std::abs(x), bits, true); }},
      {"__vneg", true, [](int64_t x, int64_t, int) { return -x; }},
      {"__vnegss", true, [&](int64_t x, int64_t, int bits) { return saturated(-x, bits, true); }},
      {"__vadd", false, sum},
      {"__vaddss", true,
       [&](int64_t x, int64_t y, int bits) { return saturated(x + y, bits, true); }},
      {"__vaddus", false,
       [&](int64_t x, int64_t y, int bits) { return saturated(x + y, bits, false); }},
      {"__vsub", false, difference},
      {"__vsubss", true,
       [&](int64_t x, int64_t y, int bits) { return saturated(x - y, bits, true); }},
      {"__vsubus", false,
       [&](int64_t x, int64_t y, int bits) { return saturated(x - y, bits, false); }},
      {"__vabsdiffs", true, [](int64_t x, int64_t y, int) { return std::abs(x - y); }},
      {"__vabsdiffu", false, [](int64_t x, int64_t y, int) { return std::abs(x - y); }},
      // vavrg: (x + y + 1) >> 1 when x + y >= 0, else (x + y) >> 1.
      {"__vavgs", true,
       [](int64_t x, int64_t y, int) {
         return x + y >= 0 ? (x + y + 1) / 2 : -((-(x + y) + 1) / 2);
       }},
      {"__vavgu", false, [](int64_t x, int64_t y, int) { return (x + y + 1) / 2; }},
      {"__vhaddu", false, [](int64_t x, int64_t y, int) { return (x + y) / 2; }},
      {"__vmaxs", true, [](int64_t x, int64_t y, int) { return std::max(x, y); }},
      {"__vmaxu", false, [](int64_t x, int64_t y, int) { return std::max(x, y); }},
      {"__vmins", true, [](int64_t x, int64_t y, int) { return std::min(x, y); }},
      {"__vminu", false, [](int64_t x, int64_t y, int) { return std::min(x, y); }},
      {"__vsads", true, nullptr},
      {"__vsadu", false, nullptr},
  };
  const std::vector<std::pair<std::string, std::function<bool(int64_t, int64_t)>>> comparisons = {
      {"eq", std::equal_to<int64_t>()},       {"ne", std::not_equal_to<int64_t>()},
      {"ges", std::greater_equal<int64_t>()}, {"geu", std::greater_equal<int64_t>()},
      {"gts", std::greater<int64_t>()},       {"gtu", std::greater<int64_t>()},
      {"les", std::less_equal<int64_t>()},    {"leu", std::less_equal<int64_t>()},
      {"lts", std::less<int64_t>()},          {"ltu", std::less<int64_t>()},
  };
  for (const auto& [name, holds] : comparisons) {
    const bool is_signed = name.size() == 3 && name[2] == 's';
    references.push_back({"__vcmp" + name, is_signed, [holds](int64_t x, int64_t y, int bits) {
                            return holds(x, y) ? (int64_t{1} << bits) - 1 : 0;
                          }});
    references.push_back({"__vset" + name, is_signed,
                          [holds](int64_t x, int64_t y, int) { return holds(x, y) ? 1 : 0; }});
  }
  return references;
}

// The SIMD intrinsics on halves and bytes, each against its lanes' definition in PTX's
// SIMD video instructions, on words with the lanes' extremes and on random ones; and a
// few results worked out by hand (two of them the examples of CUDA's documentation).
TEST_F(KernelTest, SimdIntrinsicsWorkLaneByLane) {
  std::vector<uint32_t> a = {0x1234aba5, 0x80008000, 0x807f01ff, 0xfffd0003,
                             0x80808080, 0xfff00001, 0x01020304, 0x7f800000,
                             0x80000001, 0x01ff0300, 0xff01ff00, 0xffffffff};
  std::vector<uint32_t> b = {0x1234aba6, 0x7fff0001, 0x7f80ff01, 0xfffe0002,
                             0x00000000, 0x00200001, 0x02020202, 0x807f0000,
                             0x00000000, 0x02fe0300, 0x01010001, 0x00000001};
  std::mt19937 random(61);
  while (a.size() < 64) {
    a.push_back(random());
    b.push_back(random());
  }
  const std::vector<SimdReference> references = SimdReferences();
  const size_t per_pair = 2 * references.size();
  ASSERT_EQ(per_pair, 82u);
  std::string id = MustCompile(kSimdIntrinsics, "simd_intrinsics");
  Buffer da = Upload(a), db = Upload(b), out = Zeros(a.size() * per_pair * sizeof(uint32_t));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(1), MakeDim3(static_cast<unsigned>(a.size()))},
                   {BufferArgument(da, v1::ACCESS_READ), BufferArgument(db, v1::ACCESS_READ),
                    BufferArgument(out, v1::ACCESS_WRITE)})
          .ok());
  const std::vector<uint32_t> results = Download<uint32_t>(out);
  std::map<std::string, std::vector<uint32_t>> by_name;  // per intrinsic, per pair
  for (size_t pair = 0; pair < a.size(); ++pair) {
    for (size_t k = 0; k < per_pair; ++k) {
      const SimdReference& reference = references[k / 2];
      const bool halves = k % 2 == 0;
      const std::string name = reference.name + (halves ? "2" : "4");
      const uint32_t got = results[pair * per_pair + k];
      by_name[name].push_back(got);
      EXPECT_EQ(got, reference.Of(a[pair], b[pair], halves ? 16 : 8))
          << name << "(0x" << std::hex << a[pair] << ", 0x" << b[pair] << ")";
    }
  }
  EXPECT_EQ(by_name["__vcmpeq2"][0], 0xffff0000u);
  EXPECT_EQ(by_name["__vcmpgts4"][0], 0u);
  EXPECT_EQ(by_name["__vavgs2"][3], 0xfffd0003u);  // -5 / 2 rounds to -3, 5 / 2 to 3
  EXPECT_EQ(by_name["__vabs4"][4], 0x80808080u);   // -128 wraps
  EXPECT_EQ(by_name["__vabsss4"][4], 0x7f7f7f7fu);
  EXPECT_EQ(by_name["__vaddus2"][5], 0xffff0002u);
  EXPECT_EQ(by_name["__vsubus4"][6], 0x00000102u);
  EXPECT_EQ(by_name["__vsads4"][7], 510u);  // |127 + 128| + |-128 - 127|
  EXPECT_EQ(by_name["__vnegss2"][8], 0x7fffffffu);
  EXPECT_EQ(by_name["__vsetltu4"][9], 0x01000000u);
  EXPECT_EQ(by_name["__vhaddu4"][10], 0x80017f00u);
  EXPECT_EQ(by_name["__vavgu4"][10], 0x80018001u);
  EXPECT_EQ(by_name["__vsetgeu2"][11], 0x00010001u);
  EXPECT_EQ(by_name["__vcmplts2"][11], 0xffffffffu);  // -1 < 0 and -1 < 1
}

// `value` wrapped into a lane `bits` wide, sign-extended when `is_signed`.
int64_t WrappedIntoLane(int64_t value, int bits, bool is_signed) {
  return SimdLanes(static_cast<uint32_t>(value & ((int64_t{1} << bits) - 1)), bits, is_signed)[0];
}

// Lanes, lowest first, packed into a word.
uint32_t PackedLanes(const std::vector<int64_t>& lanes, int bits) {
  uint64_t word = 0;
  for (size_t i = 0; i < lanes.size(); ++i) {
    word |= (static_cast<uint64_t>(lanes[i]) & ((uint64_t{1} << bits) - 1)) << (bits * i);
  }
  return static_cast<uint32_t>(word);
}

// The results of kDpxIntrinsics for one triple, in its order and named, as CUDA's
// documentation defines each intrinsic: on ints (_s32, _u32) or halves (_s16x2, _u16x2),
// a sum wrapping into the lane, _relu at least 0.
std::vector<std::pair<std::string, uint32_t>> DpxReference(uint32_t a, uint32_t b, uint32_t c) {
  struct Type {
    const char* name;
    int bits;
    bool is_signed;
    bool relu;
  };
  const Type s32{"_s32", 32, true, false}, u32{"_u32", 32, false, false};
  const Type s16{"_s16x2", 16, true, false}, u16{"_u16x2", 16, false, false};
  const Type s32_relu{"_s32_relu", 32, true, true}, s16_relu{"_s16x2_relu", 16, true, true};
  using Lanes3 = std::function<int64_t(int64_t, int64_t, int64_t, const Type&)>;
  const auto max = [](int64_t x, int64_t y) { return std::max(x, y); };
  const auto min = [](int64_t x, int64_t y) { return std::min(x, y); };
  const std::vector<std::pair<std::string, Lanes3>> three = {
      {"__vimax3", [&](int64_t x, int64_t y, int64_t z, const Type&) { return max(max(x, y), z); }},
      {"__vimin3", [&](int64_t x, int64_t y, int64_t z, const Type&) { return min(min(x, y), z); }},
      {"__viaddmax",
       [&](int64_t x, int64_t y, int64_t z, const Type& type) {
         return max(WrappedIntoLane(x + y, type.bits, type.is_signed), z);
       }},
      {"__viaddmin",
       [&](int64_t x, int64_t y, int64_t z, const Type& type) {
         return min(WrappedIntoLane(x + y, type.bits, type.is_signed), z);
       }},
  };
  std::vector<std::pair<std::string, uint32_t>> results;
  const auto lane_by_lane = [&](const Type& type, const auto& lane) {
    const std::vector<int64_t> x = SimdLanes(a, type.bits, type.is_signed);
    const std::vector<int64_t> y = SimdLanes(b, type.bits, type.is_signed);
    const std::vector<int64_t> z = SimdLanes(c, type.bits, type.is_signed);
    std::vector<int64_t> lanes;
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t value = lane(x[i], y[i], z[i]);
      lanes.push_back(type.relu ? std::max<int64_t>(value, 0) : value);
    }
    return PackedLanes(lanes, type.bits);
  };
  for (const auto& [prefix, op] : three) {
    for (const Type& type : {s32, u32, s16, u16, s32_relu, s16_relu}) {
      results.push_back(
          {prefix + type.name,
           lane_by_lane(type, [&](int64_t x, int64_t y, int64_t z) { return op(x, y, z, type); })});
    }
  }
  for (const auto& [prefix, op] : std::vector<std::pair<std::string, Lanes3>>{
           {"__vimax", [&](int64_t x, int64_t y, int64_t, const Type&) { return max(x, y); }},
           {"__vimin", [&](int64_t x, int64_t y, int64_t, const Type&) { return min(x, y); }}}) {
    for (const Type& type : {s32_relu, s16_relu}) {
      results.push_back(
          {prefix + type.name,
           lane_by_lane(type, [&](int64_t x, int64_t y, int64_t z) { return op(x, y, z, type); })});
    }
  }
  // __vibmax/__vibmin: the result, then whether each lane took a's (high lane times 2).
  for (const bool is_max : {true, false}) {
    for (const Type& type : {s32, u32}) {
      const int64_t x = SimdLanes(a, 32, type.is_signed)[0];
      const int64_t y = SimdLanes(b, 32, type.is_signed)[0];
      const bool first = is_max ? x >= y : x <= y;
      const std::string name = std::string(is_max ? "__vibmax" : "__vibmin") + type.name;
      results.push_back({name, PackedLanes({first ? x : y}, 32)});
      results.push_back({name + " pred", first ? 1u : 0u});
    }
  }
  for (const bool is_max : {true, false}) {
    for (const Type& type : {s16, u16}) {
      const std::vector<int64_t> x = SimdLanes(a, 16, type.is_signed);
      const std::vector<int64_t> y = SimdLanes(b, 16, type.is_signed);
      std::vector<int64_t> picked;
      uint32_t predicates = 0;
      for (int i = 0; i < 2; ++i) {
        const bool first = is_max ? x[i] >= y[i] : x[i] <= y[i];
        picked.push_back(first ? x[i] : y[i]);
        predicates |= (first ? 1u : 0u) << i;
      }
      const std::string name = std::string(is_max ? "__vibmax" : "__vibmin") + type.name;
      results.push_back({name, PackedLanes(picked, 16)});
      results.push_back({name + " pred", predicates});
    }
  }
  return results;
}

// Hopper's DPX intrinsics, each against CUDA's definition on words with the lanes'
// extremes and on random ones, and a few results worked out by hand.
TEST_F(KernelTest, DpxIntrinsicsWorkAsCudaDefinesThem) {
  std::vector<uint32_t> a = {0xfffffffb, 0x7fffffff, 0x7fff0001,
                             0xfffe0005, 0x00050001, 0xfffffffb};
  std::vector<uint32_t> b = {0x00000003, 0x00000001, 0x00010001,
                             0x00030002, 0x00030002, 0xfffffffd};
  std::vector<uint32_t> c = {0x00000001, 0xfffffffb, 0x80000000,
                             0x00040007, 0x00000000, 0x00000000};
  std::mt19937 random(67);
  while (a.size() < 32) {
    a.push_back(random());
    b.push_back(random());
    c.push_back(random());
  }
  constexpr size_t kPerTriple = 44;
  std::string id = MustCompile(kDpxIntrinsics, "dpx_intrinsics");
  Buffer da = Upload(a), db = Upload(b), dc = Upload(c);
  Buffer out = Zeros(a.size() * kPerTriple * sizeof(uint32_t));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(1), MakeDim3(static_cast<unsigned>(a.size()))},
                   {BufferArgument(da, v1::ACCESS_READ), BufferArgument(db, v1::ACCESS_READ),
                    BufferArgument(dc, v1::ACCESS_READ), BufferArgument(out, v1::ACCESS_WRITE)})
          .ok());
  const std::vector<uint32_t> results = Download<uint32_t>(out);
  std::map<std::string, std::vector<uint32_t>> by_name;  // per result, per triple
  for (size_t triple = 0; triple < a.size(); ++triple) {
    const auto expected = DpxReference(a[triple], b[triple], c[triple]);
    ASSERT_EQ(expected.size(), kPerTriple);
    for (size_t k = 0; k < kPerTriple; ++k) {
      const uint32_t got = results[triple * kPerTriple + k];
      by_name[expected[k].first].push_back(got);
      EXPECT_EQ(got, expected[k].second) << expected[k].first << "(0x" << std::hex << a[triple]
                                         << ", 0x" << b[triple] << ", 0x" << c[triple] << ")";
    }
  }
  EXPECT_EQ(by_name["__vimax3_s32"][0], 3u);
  EXPECT_EQ(by_name["__vimax3_u32"][0], 0xfffffffbu);
  EXPECT_EQ(by_name["__viaddmax_s32"][1], 0xfffffffbu);  // INT_MAX + 1 wraps below -5
  EXPECT_EQ(by_name["__viaddmax_s16x2"][2], 0x80000002u);
  EXPECT_EQ(by_name["__vimin3_s16x2_relu"][3], 0x00000002u);
  EXPECT_EQ(by_name["__vibmax_u16x2"][4], 0x00050002u);
  EXPECT_EQ(by_name["__vibmax_u16x2 pred"][4], 2u);  // high half a's, low half b's
  EXPECT_EQ(by_name["__vimax_s32_relu"][5], 0u);
  EXPECT_EQ(by_name["__vibmin_s32"][5], 0xfffffffbu);
  EXPECT_EQ(by_name["__vibmin_s32 pred"][5], 1u);
}

// CUB's block and warp collectives (kCubCollectives) over two blocks of 128 threads,
// each result against the same reduction or scan on the host.
TEST_F(KernelTest, CubCollectivesReduceAndScanBlocksAndWarps) {
  constexpr int kBlock = 128, kBlocks = 2, kPerThread = 17, kPerBlock = 10;
  const std::vector<int> in = RandomInts(kBlock * kBlocks, 71, -500, 500);
  std::string id = MustCompile(kCubCollectives, "cub_collectives");
  Buffer din = Upload(in), out = Zeros(in.size() * kPerThread * sizeof(int));
  Buffer block_out = Zeros(kBlocks * kPerBlock * sizeof(int));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(kBlocks), MakeDim3(kBlock)},
                   {BufferArgument(din, v1::ACCESS_READ), BufferArgument(out, v1::ACCESS_WRITE),
                    BufferArgument(block_out, v1::ACCESS_WRITE)})
          .ok());
  const std::vector<int> per_thread = Download<int>(out);
  const std::vector<int> per_block = Download<int>(block_out);
  const auto sum_of = [&](int begin, int end) {
    return std::accumulate(in.begin() + begin, in.begin() + end, 0);
  };
  for (int block = 0; block < kBlocks; ++block) {
    const int first = block * kBlock;
    const int* got = &per_block[block * kPerBlock];
    EXPECT_EQ(got[0], sum_of(first, first + kBlock)) << "block " << block;
    EXPECT_EQ(got[1], *std::max_element(in.begin() + first, in.begin() + first + kBlock));
    EXPECT_EQ(got[2], sum_of(first, first + 100));
    for (int warp = 0; warp < 4; ++warp) {
      EXPECT_EQ(got[3 + warp], sum_of(first + 32 * warp, first + 32 * warp + 32));
    }
    EXPECT_EQ(got[7], sum_of(first, first + 10));
    EXPECT_EQ(got[8], 4 * sum_of(first, first + kBlock) + 6 * kBlock);
    EXPECT_EQ(got[9], got[1] + 3);
    int running_max = std::numeric_limits<int>::min();
    for (int t = 0; t < kBlock; ++t) {
      const int i = first + t;
      const int* thread = &per_thread[i * kPerThread];
      SCOPED_TRACE(absl::StrCat("block ", block, ", thread ", t));
      EXPECT_EQ(thread[0], sum_of(first, i));
      EXPECT_EQ(thread[1], sum_of(first, first + kBlock));
      EXPECT_EQ(thread[10], std::max(-1000, running_max));
      EXPECT_EQ(thread[15], std::max(-1000, running_max + 3));  // the items' are x + 3 at most
      running_max = std::max(running_max, in[i]);
      EXPECT_EQ(thread[2], running_max);
      // Four items per thread, x to x + 3: those before are every earlier thread's.
      int before = 0;
      for (int u = first; u < i; ++u) before += 4 * in[u] + 6;
      for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(thread[3 + k], before);
        before += in[i] + k;
      }
      EXPECT_EQ(thread[14], before);
      EXPECT_EQ(thread[16], got[1]);
      const int half_warp = first + t / 16 * 16;
      EXPECT_EQ(thread[7], sum_of(half_warp, i + 1));
      EXPECT_EQ(thread[8], sum_of(half_warp, half_warp + 16));
      EXPECT_EQ(thread[9], in[half_warp + 3]);
      EXPECT_EQ(thread[11], sum_of(half_warp, i));
      const int warp_max = *std::max_element(in.begin() + half_warp, in.begin() + i + 1);
      EXPECT_EQ(thread[12], std::max(50, warp_max));
      if (i > half_warp) {  // the first lane's is undefined without an initial value
        EXPECT_EQ(thread[13], *std::max_element(in.begin() + half_warp, in.begin() + i));
      }
    }
  }
}

// CUB's tile loads, stores and radix sorts (kCubSorts) over two tiles of 256, each
// output against a stable sort of the same tile on the host.
TEST_F(KernelTest, CubSortsTilesStablyAsCubDoes) {
  constexpr int kThreads = 64, kItems = 4, kTile = kThreads * kItems, kTiles = 2;
  std::vector<int> keys = RandomInts(kTile * kTiles, 73, -40, 40);  // many equal keys
  keys[5] = std::numeric_limits<int>::min();
  keys[6] = std::numeric_limits<int>::max();
  std::vector<float> floats = RandomFloats(kTile * kTiles, 79);
  floats[0] = -0.0f;  // equal to +0.0f: the two keep their order
  floats[1] = 0.0f;
  floats[2] = -std::numeric_limits<float>::infinity();
  floats[3] = -1e-30f;
  std::string id = MustCompile(kCubSorts, "cub_sorts");
  Buffer dkeys = Upload(keys), dfloats = Upload(floats);
  const size_t bytes = keys.size() * sizeof(int);
  Buffer sorted = Zeros(bytes), positions = Zeros(bytes), sorted_floats = Zeros(bytes);
  Buffer low_bits = Zeros(bytes), striped = Zeros(bytes);
  ASSERT_TRUE(session_
                  ->Launch(id, {MakeDim3(kTiles), MakeDim3(kThreads)},
                           {BufferArgument(dkeys, v1::ACCESS_READ),
                            BufferArgument(dfloats, v1::ACCESS_READ),
                            BufferArgument(sorted, v1::ACCESS_WRITE),
                            BufferArgument(positions, v1::ACCESS_WRITE),
                            BufferArgument(sorted_floats, v1::ACCESS_WRITE),
                            BufferArgument(low_bits, v1::ACCESS_WRITE),
                            BufferArgument(striped, v1::ACCESS_WRITE)})
                  .ok());
  const std::vector<int> got_keys = Download<int>(sorted), got_positions = Download<int>(positions);
  const std::vector<int> got_low = Download<int>(low_bits), got_striped = Download<int>(striped);
  const std::vector<float> got_floats = Download<float>(sorted_floats);
  for (int tile = 0; tile < kTiles; ++tile) {
    SCOPED_TRACE(absl::StrCat("tile ", tile));
    const int first = tile * kTile;
    std::vector<int> order(kTile);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int x, int y) { return keys[first + x] < keys[first + y]; });
    std::vector<int> want_keys, low;
    for (int position : order) want_keys.push_back(keys[first + position]);
    EXPECT_EQ(std::vector<int>(got_keys.begin() + first, got_keys.begin() + first + kTile),
              want_keys);
    EXPECT_EQ(
        std::vector<int>(got_positions.begin() + first, got_positions.begin() + first + kTile),
        order);
    EXPECT_EQ(std::vector<int>(got_striped.begin() + first, got_striped.begin() + first + kTile),
              want_keys);
    low.assign(keys.begin() + first, keys.begin() + first + kTile);
    std::stable_sort(low.begin(), low.end(), [](int x, int y) { return (x & 15) < (y & 15); });
    EXPECT_EQ(std::vector<int>(got_low.begin() + first, got_low.begin() + first + kTile), low);
    // A striped load: thread t's items are the tile's t, t + 64, ...; the sort's order of
    // equal keys is theirs.
    std::vector<float> loaded;
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < kItems; ++i) loaded.push_back(floats[first + t + i * kThreads]);
    }
    std::stable_sort(loaded.begin(), loaded.end(), std::greater<float>());
    for (int i = 0; i < kTile; ++i) {
      EXPECT_EQ(std::signbit(got_floats[first + i]), std::signbit(loaded[i])) << i;
      EXPECT_EQ(got_floats[first + i], loaded[i]) << i;
    }
  }
}

// libcu++'s <cuda/cmath> and <cuda/functional> (kLibcudacxxArithmetic), against the same
// arithmetic on the host, and cuda::maximum and cuda::minimum as CUB's operators.
TEST_F(KernelTest, LibcudacxxIntegerArithmeticAndFunctionObjects) {
  constexpr int kN = 64;
  std::vector<int> a = RandomInts(kN, 83, 0, 1000000), b = RandomInts(kN, 89, 1, 1000);
  a[0] = 0;
  a[1] = 1000;
  b[1] = 10;  // exact: ceil_div, round_up and round_down agree
  std::string id = MustCompile(kLibcudacxxArithmetic, "libcudacxx_arithmetic");
  Buffer da = Upload(a), db = Upload(b), out = Zeros(kN * 6 * sizeof(int));
  Buffer block_out = Zeros(5 * sizeof(unsigned));
  ASSERT_TRUE(
      session_
          ->Launch(
              id, {MakeDim3(1), MakeDim3(kN)},
              {BufferArgument(da, v1::ACCESS_READ), BufferArgument(db, v1::ACCESS_READ),
               BufferArgument(out, v1::ACCESS_WRITE), BufferArgument(block_out, v1::ACCESS_WRITE)})
          .ok());
  const std::vector<int> got = Download<int>(out);
  for (int t = 0; t < kN; ++t) {
    SCOPED_TRACE(absl::StrCat(a[t], " by ", b[t]));
    const int up = (a[t] + b[t] - 1) / b[t];
    EXPECT_EQ(got[t * 6 + 0], up);
    EXPECT_EQ(got[t * 6 + 1], up * b[t]);
    EXPECT_EQ(got[t * 6 + 2], a[t] / b[t] * b[t]);
    EXPECT_EQ(got[t * 6 + 3], a[t] > 0 ? static_cast<int>(std::floor(std::log2(a[t]))) : -1);
    EXPECT_EQ(got[t * 6 + 4], a[t] > 0 ? static_cast<int>(std::to_string(a[t]).size()) - 1 : -1);
    EXPECT_EQ(got[t * 6 + 5], std::abs(a[t] - b[t]));
  }
  EXPECT_EQ(Download<unsigned>(block_out),
            (std::vector<unsigned>{static_cast<unsigned>(*std::max_element(a.begin(), a.end())),
                                   static_cast<unsigned>(*std::min_element(a.begin(), a.end())), 1u,
                                   2147483648u, 40u}));
}

// CUB's BlockExchange, BlockHistogram and BlockDiscontinuity (kCubExchanges) over a tile
// of 64 threads x 4 items, against the arrangements and flags computed on the host.
TEST_F(KernelTest, CubExchangesCountsAndFlagsATile) {
  constexpr int kThreads = 64, kItems = 4, kTile = kThreads * kItems;
  const std::vector<int> tile = RandomInts(kTile, 97, 0, 2);  // runs of equal items
  std::string id = MustCompile(kCubExchanges, "cub_exchanges");
  Buffer din = Upload(tile), out = Zeros(kThreads * 52 * sizeof(int));
  Buffer histogram = Zeros(16 * sizeof(unsigned)), partial = Zeros(kTile * sizeof(int));
  ASSERT_TRUE(
      session_
          ->Launch(id, {MakeDim3(1), MakeDim3(kThreads)},
                   {BufferArgument(din, v1::ACCESS_READ), BufferArgument(out, v1::ACCESS_WRITE),
                    BufferArgument(histogram, v1::ACCESS_WRITE),
                    BufferArgument(partial, v1::ACCESS_WRITE)})
          .ok());
  const std::vector<int> got = Download<int>(out);
  const auto differs = [&](int a, int b) { return tile[a] != tile[b] ? 1 : 0; };
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kItems; ++i) {
      SCOPED_TRACE(absl::StrCat("thread ", t, ", item ", i));
      const int place = t * kItems + i;
      const int* o = &got[t * 52 + i];
      EXPECT_EQ(o[0], tile[t + i * kThreads]);                        // striped
      EXPECT_EQ(o[4], tile[place]);                                   // and back
      EXPECT_EQ(o[8], tile[t / 32 * 32 * kItems + t % 32 + i * 32]);  // warp-striped
      EXPECT_EQ(o[12], tile[kTile - 1 - place]);                      // scattered
      EXPECT_EQ(o[16], place == 0 ? 1 : differs(place - 1, place));
      EXPECT_EQ(o[20],
                place == kTile - 1 ? (tile[place] != -1 ? 1 : 0) : differs(place, place + 1));
      EXPECT_EQ(o[24], place == 0 ? 1 : (differs(place - 1, place) || place == 100 ? 1 : 0));
      EXPECT_EQ(o[28], place == 0 ? (tile[0] != 7 ? 1 : 0) : differs(place - 1, place));
      EXPECT_EQ(o[32], place == kTile - 1 ? (tile[place] != 7 ? 1 : 0) : differs(place, place + 1));
      EXPECT_EQ(o[36], o[16]);
      EXPECT_EQ(o[40], place == kTile - 1 ? 1 : differs(place, place + 1));
      EXPECT_EQ(o[44], tile[kTile - 1 - (t + i * kThreads)]);  // scattered, striped
      EXPECT_EQ(o[48], place < 100 ? tile[place] : -5);        // the first 100 loaded
    }
  }
  std::vector<unsigned> counts(16);
  for (int item : tile) ++counts[item & 15];
  EXPECT_EQ(Download<unsigned>(histogram), counts);
  std::vector<int> first_100(kTile, 0);
  std::copy(tile.begin(), tile.begin() + 100, first_100.begin());
  EXPECT_EQ(Download<int>(partial), first_100);
}

// CUB's BlockMergeSort and WarpMergeSort (kCubMergeSorts), against stable sorts on the
// host: of the block's tile, of its floats with +inf past the first 200, and of each
// 16-lane warp's tile, largest first.
TEST_F(KernelTest, CubMergeSortsAreStable) {
  constexpr int kThreads = 64, kItems = 4, kTile = kThreads * kItems, kPer = 20;
  const std::vector<int> keys = RandomInts(kTile, 101, -20, 20);  // many equal keys
  const std::vector<float> floats = RandomFloats(kTile, 103);
  std::string id = MustCompile(kCubMergeSorts, "cub_merge_sorts");
  Buffer dkeys = Upload(keys), dfloats = Upload(floats), out = Zeros(kThreads * kPer * sizeof(int));
  ASSERT_TRUE(session_
                  ->Launch(id, {MakeDim3(1), MakeDim3(kThreads)},
                           {BufferArgument(dkeys, v1::ACCESS_READ),
                            BufferArgument(dfloats, v1::ACCESS_READ),
                            BufferArgument(out, v1::ACCESS_WRITE)})
                  .ok());
  const std::vector<int> got = Download<int>(out);
  const auto field = [&](int k, int place) {  // the k-th output's item at `place`
    return got[place / kItems * kPer + 4 * k + place % kItems];
  };
  std::vector<int> order(kTile);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  std::vector<float> valid(floats.begin(), floats.begin() + 200);
  std::stable_sort(valid.begin(), valid.end());
  valid.resize(kTile, std::numeric_limits<float>::infinity());
  for (int place = 0; place < kTile; ++place) {
    SCOPED_TRACE(absl::StrCat("place ", place));
    EXPECT_EQ(field(0, place), keys[order[place]]);
    EXPECT_EQ(field(1, place), order[place]);
    float sorted_float;
    const int bits = field(2, place);
    std::memcpy(&sorted_float, &bits, sizeof(float));
    EXPECT_EQ(sorted_float, valid[place]);
  }
  for (int warp = 0; warp < kThreads / 16; ++warp) {
    const int first = warp * 16 * kItems;
    std::vector<int> warp_order(16 * kItems);
    std::iota(warp_order.begin(), warp_order.end(), 0);
    std::stable_sort(warp_order.begin(), warp_order.end(),
                     [&](int a, int b) { return keys[first + a] > keys[first + b]; });
    for (int p = 0; p < 16 * kItems; ++p) {
      SCOPED_TRACE(absl::StrCat("warp ", warp, ", place ", p));
      EXPECT_EQ(field(3, first + p), keys[first + warp_order[p]]);
      EXPECT_EQ(field(4, first + p), warp_order[p]);
    }
  }
}

// __activemask in a branch gives the lanes that took it: a warp-aggregated append
// reserves exactly their places (kActiveMaskAppend).
TEST_F(KernelTest, ActiveMaskGivesTheLanesInTheBranch) {
  constexpr int kN = 128;  // two blocks of 64: four warps
  const std::vector<int> in = RandomInts(kN, 53, -50, 50);
  std::string id = MustCompile(kActiveMaskAppend, "active_mask_append");
  Buffer din = Upload(in), count = Zeros(sizeof(unsigned)), kept = Zeros(kN * sizeof(int));
  Buffer masks = Zeros(kN * sizeof(unsigned));
  ASSERT_TRUE(
      session_
          ->Launch(
              id, {MakeDim3(2), MakeDim3(64)},
              {BufferArgument(din, v1::ACCESS_READ), BufferArgument(count, v1::ACCESS_READ_WRITE),
               BufferArgument(kept, v1::ACCESS_WRITE), BufferArgument(masks, v1::ACCESS_WRITE)})
          .ok());
  std::vector<int> positive;
  for (int i = 0; i < kN; ++i) {
    if (in[i] > 0) positive.push_back(i);
  }
  ASSERT_EQ(Download<unsigned>(count)[0], positive.size());
  std::vector<int> appended = Download<int>(kept);
  appended.resize(positive.size());
  std::sort(appended.begin(), appended.end());
  EXPECT_EQ(appended, positive);
  const std::vector<unsigned> lanes = Download<unsigned>(masks);
  for (int i = 0; i < kN; ++i) {
    unsigned branch = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if (in[i / 32 * 32 + lane] > 0) branch |= 1u << lane;
    }
    EXPECT_EQ(lanes[i], in[i] > 0 ? branch : 0u) << i;
  }
}

// Coalesced groups take the lanes that reach a call together: each branch's lanes, and
// each label's part of a warp (kCoalescedGroups).
TEST_F(KernelTest, CoalescedGroupsFollowTheBranchesTaken) {
  constexpr int kN = 128;  // two blocks of 64: four warps
  const std::vector<int> in = RandomInts(kN, 43, -50, 50);
  std::string id = MustCompile(kCoalescedGroups, "coalesced_groups");
  Buffer din = Upload(in), count = Zeros(sizeof(unsigned)), kept = Zeros(kN * sizeof(int));
  Buffer shape = Zeros(4 * kN * sizeof(unsigned)), sums = Zeros(3 * kN * sizeof(int));
  Buffer sides = Zeros(kN * sizeof(unsigned)), votes = Zeros(2 * kN * sizeof(unsigned));
  ASSERT_TRUE(
      session_
          ->Launch(
              id, {MakeDim3(2), MakeDim3(64)},
              {BufferArgument(din, v1::ACCESS_READ), BufferArgument(count, v1::ACCESS_READ_WRITE),
               BufferArgument(kept, v1::ACCESS_WRITE), BufferArgument(shape, v1::ACCESS_WRITE),
               BufferArgument(sums, v1::ACCESS_WRITE), BufferArgument(sides, v1::ACCESS_WRITE),
               BufferArgument(votes, v1::ACCESS_WRITE)})
          .ok());
  std::vector<int> positive;
  for (int i = 0; i < kN; ++i) {
    if (in[i] > 0) positive.push_back(i);
  }
  const unsigned appended = Download<unsigned>(count)[0];
  ASSERT_EQ(appended, positive.size());
  std::vector<int> appended_indices = Download<int>(kept);
  appended_indices.resize(appended);
  std::sort(appended_indices.begin(), appended_indices.end());
  EXPECT_EQ(appended_indices, positive);

  const std::vector<unsigned> shapes = Download<unsigned>(shape);
  const std::vector<int> results = Download<int>(sums);
  const std::vector<unsigned> side_shapes = Download<unsigned>(sides);
  const std::vector<unsigned> part_votes = Download<unsigned>(votes);
  for (int warp = 0; warp < kN / 32; ++warp) {
    // Each group's members, in rank order, by what forms it.
    auto members = [&](auto same_group_as, int i) {
      std::vector<int> group;
      for (int j = warp * 32; j < warp * 32 + 32; ++j) {
        if (same_group_as(j, i)) group.push_back(j);
      }
      return group;
    };
    for (int i = warp * 32; i < warp * 32 + 32; ++i) {
      const auto branch =
          members([](int a, int b) { return (a % 32 % 3 == 0) == (b % 32 % 3 == 0); }, i);
      const auto part = members([&](int a, int b) { return (in[a] & 3) == (in[b] & 3); }, i);
      const auto side = members([&](int a, int b) { return (in[a] > 0) == (in[b] > 0); }, i);
      auto rank_in = [i](const std::vector<int>& group) {
        return static_cast<unsigned>(std::find(group.begin(), group.end(), i) - group.begin());
      };
      const unsigned branch_rank = rank_in(branch), part_rank = rank_in(part);
      const bool multiple_of_three = i % 32 % 3 == 0;
      EXPECT_EQ(shapes[4 * i], branch.size() + (multiple_of_three ? 0 : 100)) << i;
      EXPECT_EQ(shapes[4 * i + 1], branch_rank) << i;
      EXPECT_EQ(shapes[4 * i + 2], part.size() * 32 + part_rank) << i;
      unsigned ballot = 0, below = 0;
      int sum = 0, scan = 0, maximum = in[part[0]];
      for (size_t r = 0; r < part.size(); ++r) {
        if (in[part[r]] > 0) ballot |= 1u << r;
        if (r < part_rank) below += in[part[r]];
        maximum = std::max(maximum, in[part[r]]);
      }
      for (size_t r = 0; r < branch.size(); ++r) {
        sum += in[branch[r]];
        if (r <= branch_rank) scan += in[branch[r]];
      }
      EXPECT_EQ(shapes[4 * i + 3], ballot) << i;
      EXPECT_EQ(results[3 * i], multiple_of_three ? sum : scan) << i;
      EXPECT_EQ(results[3 * i + 1], maximum) << i;
      EXPECT_EQ(results[3 * i + 2], static_cast<int>(below)) << i;
      EXPECT_EQ(side_shapes[i], side.size() * 32 + rank_in(side)) << i;
      const auto parity = members(
          [&](int a, int b) { return (in[a] > 0) == (in[b] > 0) && (in[a] & 1) == (in[b] & 1); },
          i);
      unsigned any = 0, all = 2, same_tens = 0;
      for (int j : parity) {
        if (in[j] > 25) any = 1;
        if (in[j] % 3 != 0) all = 0;
        if (in[j] / 10 == in[i] / 10) ++same_tens;
      }
      EXPECT_EQ(part_votes[2 * i], parity.size() * 32 + rank_in(parity)) << i;
      EXPECT_EQ(part_votes[2 * i + 1], any | all | same_tens << 2) << i;
    }
  }
}

TEST_F(KernelTest, TileScansAndBitReductions) {
  constexpr int kN = 128;  // two blocks of 64, eight tiles of 16
  const std::vector<int> in = RandomInts(kN, 41, 0, 1000);
  std::string id = MustCompile(kTileScans, "tile_scans");
  Buffer din = Upload(in), inclusive = Zeros(kN * sizeof(int)), exclusive = Zeros(kN * sizeof(int));
  Buffer maxima = Zeros(kN * sizeof(int)), bits = Zeros(3 * kN / 16 * sizeof(unsigned));
  ASSERT_TRUE(
      session_
          ->Launch(
              id, {MakeDim3(2), MakeDim3(64)},
              {BufferArgument(din, v1::ACCESS_READ), BufferArgument(inclusive, v1::ACCESS_WRITE),
               BufferArgument(exclusive, v1::ACCESS_WRITE),
               BufferArgument(maxima, v1::ACCESS_WRITE), BufferArgument(bits, v1::ACCESS_WRITE)})
          .ok());
  const std::vector<int> inclusive_sums = Download<int>(inclusive);
  const std::vector<int> exclusive_sums = Download<int>(exclusive);
  const std::vector<int> running_maxima = Download<int>(maxima);
  const std::vector<unsigned> tile_bits = Download<unsigned>(bits);
  for (int tile = 0; tile < kN / 16; ++tile) {
    int sum = 0, maximum = 0;
    unsigned all = ~0u, any = 0, odd = 0;
    for (int rank = 0; rank < 16; ++rank) {
      const int i = tile * 16 + rank;
      if (rank > 0) {
        EXPECT_EQ(exclusive_sums[i], sum) << i;
      }
      sum += in[i];
      maximum = std::max(maximum, in[i]);
      EXPECT_EQ(inclusive_sums[i], sum) << i;
      EXPECT_EQ(running_maxima[i], maximum) << i;
      all &= static_cast<unsigned>(in[i]);
      any |= static_cast<unsigned>(in[i]);
      odd ^= static_cast<unsigned>(in[i]);
    }
    EXPECT_EQ(exclusive_sums[tile * 16], 0) << "rank 0's exclusive scan";
    EXPECT_EQ(tile_bits[3 * tile], all) << tile;
    EXPECT_EQ(tile_bits[3 * tile + 1], any) << tile;
    EXPECT_EQ(tile_bits[3 * tile + 2], odd) << tile;
  }
}

TEST_F(KernelTest, AFailedAssertionFailsItsLaunchNamingTheLine) {
  if (!OnCpu()) GTEST_SKIP() << "on a GPU a failed assertion loses the context";
  constexpr int kN = 300;
  std::string id = MustCompile(kAssertingDouble, "checked_double");
  std::vector<int> good(kN, 4), bad(kN, 4);
  bad[123] = -1;
  Buffer din = Upload(good), dbad = Upload(bad), dout = Zeros(kN * sizeof(int));
  Buffer kept = Upload(std::vector<int>{7, 7});
  auto launch = [&](const Buffer& in) {
    return session_->Launch(id, {MakeDim3((kN + 63) / 64), MakeDim3(64)},
                            {BufferArgument(in, v1::ACCESS_READ), Int32Argument(kN),
                             BufferArgument(dout, v1::ACCESS_WRITE)});
  };
  ASSERT_TRUE(launch(din).ok());
  EXPECT_EQ(Download<int>(dout), std::vector<int>(kN, 8)) << "a passing assertion is silent";

  ASSERT_TRUE(launch(dbad).ok());
  absl::Status synced = session_->Synchronize();
  EXPECT_EQ(synced.code(), absl::StatusCode::kAborted) << synced;
  EXPECT_THAT(std::string(synced.message()), HasSubstr("kernel.cu:5"));
  EXPECT_THAT(std::string(synced.message()), HasSubstr("in[i] >= 0"));
  absl::Status tainted = session_->Read(dout, 0, kN * sizeof(int)).status();
  EXPECT_EQ(tainted.code(), absl::StatusCode::kFailedPrecondition) << tainted;
  EXPECT_THAT(std::string(tainted.message()), HasSubstr("assertion"));
  EXPECT_EQ(Download<int>(kept), (std::vector<int>{7, 7})) << "other buffers are intact";

  // The device serves on: the next launch runs and its output is good again.
  ASSERT_TRUE(launch(din).ok());
  EXPECT_EQ(Download<int>(dout), std::vector<int>(kN, 8));
}

TEST_F(KernelTest, ATrapFailsItsLaunchAndTheDeviceServesOn) {
  if (!OnCpu()) GTEST_SKIP() << "on a GPU a trap loses the context";
  std::string id = MustCompile(kTrapping, "trapping");
  Buffer out = Upload(std::vector<int>(32, 1));
  const auto launch = [&](int how) {
    return session_->Launch(id, {MakeDim3(1), MakeDim3(32)},
                            {Int32Argument(how), BufferArgument(out, v1::ACCESS_READ_WRITE)});
  };
  for (const auto& [how, call] : {std::pair{1, "__trap()"}, std::pair{2, "__brkpt()"}}) {
    ASSERT_TRUE(launch(how).ok());
    absl::Status synced = session_->Synchronize();
    EXPECT_EQ(synced.code(), absl::StatusCode::kAborted) << synced;
    EXPECT_THAT(std::string(synced.message()), HasSubstr(call));
    // The launch's output is tainted; the device runs the next launch.
    out = Upload(std::vector<int>(32, 1));
    ASSERT_TRUE(launch(0).ok());
    EXPECT_EQ(Download<int>(out), std::vector<int>(32, 2));
  }
}

TEST_F(KernelTest, TheRestOfTheGroupAndHalfPrecisionApi) {
  constexpr int kThreads = 64;
  std::vector<int> in = RandomInts(kThreads, 26, 0, 99);
  std::vector<unsigned> expected(8 * kThreads);
  std::vector<float> expected_halves(8 * kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const int tile = t / 8 * 8, rank = t % 8;
    bool any = false, all = true;
    unsigned parity = 0;
    int least = in[tile];
    for (int r = 0; r < 8; ++r) {
      any = any || in[tile + r] > 90;
      all = all && in[tile + r] >= 0;
      if (in[tile + r] % 2 == in[t] % 2) parity |= 1u << r;
      least = std::min(least, in[tile + r]);
    }
    expected[8 * t + 0] = 0xffffffffu;  // v / 1000 is 0 in every lane
    expected[8 * t + 1] = 1;
    expected[8 * t + 2] = (any ? 1 : 0) + (all ? 2 : 0);
    expected[8 * t + 3] = static_cast<unsigned>((rank < 2 ? in[t] : in[t - 2]) +
                                                1000 * (rank == 7 ? in[t] : in[t + 1]));
    expected[8 * t + 4] = static_cast<unsigned>(in[tile + 7] + 1000 * least);
    expected[8 * t + 5] = parity;
    expected[8 * t + 6] = static_cast<unsigned>(t % 4 + 10 * 4 + 100 * kThreads);
    expected[8 * t + 7] = static_cast<unsigned>(t);
    const float a = 0.25f * (t % 8), b = -1.5f;
    expected_halves[8 * t + 0] = a + b;
    expected_halves[8 * t + 1] = a - b;
    expected_halves[8 * t + 2] = -0.75f;
    expected_halves[8 * t + 3] = 1.5f;
    expected_halves[8 * t + 4] = 3.0f;
    expected_halves[8 * t + 5] = (0.5f * 0.5f + 0.5f) + (2.0f * 2.0f + 2.0f);
    expected_halves[8 * t + 6] = 2.5f;
    expected_halves[8 * t + 7] = a * b + a;  // a * b is a half exactly for these values
  }
  std::string id = MustCompile(kGroupAndHalfExtras, "extras");
  Buffer din = Upload(in), dout = Zeros(expected.size() * sizeof(unsigned)),
         dhalves = Zeros(expected_halves.size() * sizeof(float));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(1), MakeDim3(kThreads)},
                               {BufferArgument(din, v1::ACCESS_READ),
                                BufferArgument(dout, v1::ACCESS_WRITE),
                                BufferArgument(dhalves, v1::ACCESS_WRITE)})
                  .ok());
  EXPECT_EQ(Download<unsigned>(dout), expected);
  ExpectNear(Download<float>(dhalves), expected_halves, 0.0f);
}

TEST_F(KernelTest, WhatKernelsPrintReachesTheirSessionsNextSynchronize) {
  if (!OnCpu()) GTEST_SKIP() << "GPU kernels print to the daemon's standard output";
  std::string id = MustCompile(kPrintingKernel, "report");
  std::vector<int> in(300);
  for (int i = 0; i < 300; ++i) in[i] = 1000 + i;
  Buffer din = Upload(in);
  OpenBystander();
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_TRUE(session_->Launch(id, {MakeDim3(3), MakeDim3(100)},
                                 {BufferArgument(din, v1::ACCESS_READ), Int32Argument(300)})
                    .ok());
  }
  std::string printed;
  ASSERT_TRUE(session_->Synchronize(std::nullopt, &printed).ok());
  for (const char* line : {"block 0 starts with 1000\n", "block 1 starts with 1100\n",
                           "block 2 starts with 1200\n"}) {
    EXPECT_EQ(absl::StrContains(printed, line), true) << printed;
  }
  EXPECT_EQ(std::count(printed.begin(), printed.end(), '\n'), 6) << "both launches, once";
  std::string again, theirs;
  ASSERT_TRUE(session_->Synchronize(std::nullopt, &again).ok());
  EXPECT_EQ(again, "") << "taken by the first Synchronize";
  ASSERT_TRUE(bystander_->Synchronize(std::nullopt, &theirs).ok());
  EXPECT_EQ(theirs, "") << "another session sees none of it";
}

TEST_F(KernelTest, RoundingIntrinsicsAndFences) {
  std::string id = MustCompile(kRoundingAndFences, "rounding");
  Buffer out = Zeros(12 * sizeof(float));
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(1), MakeDim3(1)},
                               {BufferArgument(out, v1::ACCESS_WRITE)})
                  .ok());
  // 2.5 rounds to even; -2.7 toward zero; -2^18 * 3 * 2^16 is -12 * 2^32.
  EXPECT_EQ(Download<float>(out), (std::vector<float>{3.5f, 3.5f, 0.25f, 2.5f, 3.25f, 4.5f,
                                                      6.5f, -2.0f, 2.0f, 7.0f, 1.0f, -12.0f}));
}

TEST_F(KernelTest, Clock64MovesForwardWhileAKernelSpins) {
  constexpr char kSpin[] = R"(
      extern "C" __global__ void spin(long long* out, long long ticks) {
        long long start = clock64();
        long long now = start;
        while (now - start < ticks) now = clock64();
        out[0] = start;
        out[1] = now;
      })";
  std::string id = MustCompile(kSpin, "spin");
  Buffer out = Zeros(2 * sizeof(long long));
  constexpr long long kTicks = 100000;
  ASSERT_TRUE(session_->Launch(id, {MakeDim3(1), MakeDim3(1)},
                               {BufferArgument(out, v1::ACCESS_WRITE), Int64Argument(kTicks)})
                  .ok());
  std::vector<long long> clock = Download<long long>(out);
  ASSERT_EQ(clock.size(), 2u);
  EXPECT_GT(clock[0], 0);
  EXPECT_GE(clock[1] - clock[0], kTicks);
}

TEST_F(KernelTest, CompileErrorReturnsTheLog) {
  absl::StatusOr<v1::CompileResponse> compiled = session_->Compile(
      "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }", "broken");
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(compiled.status().message()), HasSubstr("undefined_name"));
}

TEST_F(KernelTest, CpuDriverNamesWhatItCannotRun) {
  if (!OnCpu()) GTEST_SKIP() << "GPUs read textures";
  absl::Status unsupported =
      session_->Compile("extern \"C\" __global__ void k(float* x, unsigned long long t) { "
                        "x[0] = tex1Dfetch<float>(t, 0); }",
                        "k")
          .status();
  EXPECT_EQ(unsupported.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unsupported.message()), HasSubstr("textures"));
}

TEST_F(KernelTest, SkippedLaunchTaintsItsOutputsWithTheCompileError) {
  absl::Status failed = session_->Compile(
      "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }", "broken")
                            .status();
  ASSERT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  absl::optional<absl::Cord> id = failed.GetPayload(kKernelIdPayload);
  ASSERT_TRUE(id.has_value()) << "a failed compile names its kernel id";
  Buffer out = Upload(std::vector<float>{1, 2, 3});
  Buffer in = Upload(std::vector<float>{4, 5, 6});
  absl::Status skipped =
      session_->Launch(std::string(*id), {MakeDim3(1), MakeDim3(1)},
                       {BufferArgument(out, v1::ACCESS_WRITE)});
  EXPECT_EQ(skipped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(skipped.message()), HasSubstr("undefined_name"));
  // A later read reports the root cause instead of returning the stale {1, 2, 3}.
  absl::Status read = session_->Read(out, 0, 12).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(read.message()), HasSubstr("undefined_name"));
  // Untouched buffers are fine; rewriting the whole output clears the taint.
  EXPECT_EQ(Download<float>(in), (std::vector<float>{4, 5, 6}));
  ASSERT_TRUE(session_->Write(out, 0, ToBytes(std::vector<float>{7, 8, 9})).ok());
  EXPECT_EQ(Download<float>(out), (std::vector<float>{7, 8, 9}));
}

TEST_F(KernelTest, LaunchChecksArgumentsAndShapeBeforeRunning) {
  std::string id = MustCompile(kVectorAdd, "vector_add");
  Buffer a = Upload(std::vector<float>(4, 1.0f));
  absl::Status wrong_count =
      session_->Launch(id, {MakeDim3(1), MakeDim3(4)}, {BufferArgument(a, v1::ACCESS_READ)});
  EXPECT_EQ(wrong_count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong_count.message()), HasSubstr("takes 4 arguments"));
  absl::Status wrong_kind = session_->Launch(
      id, {MakeDim3(1), MakeDim3(4)},
      {BufferArgument(a, v1::ACCESS_READ), BufferArgument(a, v1::ACCESS_READ),
       BufferArgument(a, v1::ACCESS_WRITE), FloatArgument(4.0f)});
  EXPECT_EQ(wrong_kind.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong_kind.message()), HasSubstr("int n"));
  std::vector<v1::KernelArg> args = {BufferArgument(a, v1::ACCESS_READ),
                                     BufferArgument(a, v1::ACCESS_READ),
                                     BufferArgument(a, v1::ACCESS_WRITE), Int32Argument(4)};
  absl::Status too_big = session_->Launch(id, {MakeDim3(1), MakeDim3(2048)}, args);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("2048 threads"));
  EXPECT_EQ(session_->Launch(id, {MakeDim3(1), MakeDim3(4), 1 << 20}, args).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->Launch(std::string(64, 'f'), {MakeDim3(1), MakeDim3(4)}, args).code(),
            absl::StatusCode::kFailedPrecondition);
  // A zero grid does nothing, not even check the buffers' contents.
  EXPECT_TRUE(session_->Launch(id, {MakeDim3(0, 0, 0), MakeDim3(4)}, args).ok());
  EXPECT_EQ(Download<float>(a), std::vector<float>(4, 1.0f));
}

TEST_F(KernelTest, CompiledKernelsSurviveARestartInTheDiskCache) {
  const std::string source = std::string(kVectorAdd) + "\n// restart test\n";
  absl::StatusOr<v1::CompileResponse> first = session_->Compile(source, "vector_add");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cache_hit());
  StartDaemon();
  absl::StatusOr<v1::CompileResponse> second = session_->Compile(source, "vector_add");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cache_hit());
  EXPECT_EQ(second->kernel_id(), first->kernel_id());
  absl::StatusOr<testing::HttpResponse> metrics =
      testing::HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(metrics->body,
              HasSubstr("gpucmd_compile_cache_requests_total{result=\"disk_hit\"} 1"));
  // And it runs without being compiled again.
  Buffer a = Upload(std::vector<float>{1, 2}), b = Upload(std::vector<float>{10, 20});
  Buffer c = Zeros(2 * sizeof(float));
  ASSERT_TRUE(session_->Launch(second->kernel_id(), {MakeDim3(1), MakeDim3(2)},
                               {BufferArgument(a, v1::ACCESS_READ),
                                BufferArgument(b, v1::ACCESS_READ),
                                BufferArgument(c, v1::ACCESS_WRITE), Int32Argument(2)})
                  .ok());
  EXPECT_EQ(Download<float>(c), (std::vector<float>{11, 22}));
}

TEST_F(KernelTest, FaultingAndHangingKernelsHarmNeitherTheDaemonNorOtherSessions) {
  if (!OnCpu()) GTEST_SKIP() << "on a GPU a fault costs the context: see the next test";
  OpenBystander();

  std::string wild = MustCompile(kWildPointer, "wild");
  std::string spin = MustCompile(R"(
    extern "C" __global__ void spin(int* out) {
      volatile int forever = 1;
      while (forever) {}
      out[0] = 1;
    })", "spin");
  Buffer out = Zeros(16);
  ASSERT_TRUE(session_->Launch(wild, {MakeDim3(1), MakeDim3(1)},
                               {BufferArgument(out, v1::ACCESS_WRITE)})
                  .ok());
  absl::Status faulted = session_->Synchronize();
  EXPECT_EQ(faulted.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(faulted.message()), HasSubstr("Segmentation fault"));
  absl::Status tainted = session_->Read(out, 0, 16).status();
  EXPECT_EQ(tainted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(tainted.message()), HasSubstr("Segmentation fault"));

  ASSERT_TRUE(session_->Launch(spin, {MakeDim3(1), MakeDim3(1)},
                               {BufferArgument(out, v1::ACCESS_WRITE)})
                  .ok());
  absl::Status hung = session_->Synchronize();
  EXPECT_EQ(hung.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(hung.message()), HasSubstr("time limit"));

  // The other session's memory is intact, and kernels run again on a new executor.
  EXPECT_EQ(bystander_->Read(*kept_, 0, 16).value(), "bystander-bytes!");
  ExpectKernelsRun(out);
}

// More sessions than device streams: some share one. A kernel's fault is reported to the
// session that launched it, and only to it, whoever synchronizes the shared stream first.
TEST_F(KernelTest, AFaultIsReportedToItsSessionAloneWhenSessionsShareAStream) {
  if (!OnCpu()) GTEST_SKIP() << "on a GPU a fault costs the context: see the next test";
  std::string wild = MustCompile(kWildPointer, "wild");
  Buffer out = Zeros(16);  // the session's stream
  std::vector<Session> others;
  std::vector<Buffer> theirs;
  for (int i = 0; i < 8; ++i) {  // twice the daemon's four streams
    absl::StatusOr<Session> other = client_->OpenSession(0, absl::StrCat("other", i));
    ASSERT_TRUE(other.ok()) << other.status();
    absl::StatusOr<Buffer> buffer = other->Allocate(16);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE(other->Write(*buffer, 0, "0123456789abcdef").ok());
    others.push_back(*std::move(other));
    theirs.push_back(*std::move(buffer));
  }
  ASSERT_TRUE(session_->Launch(wild, {MakeDim3(1), MakeDim3(1)},
                               {BufferArgument(out, v1::ACCESS_WRITE)})
                  .ok());
  absl::StatusOr<std::string> tainted = session_->Read(out, 0, 16);  // waits for the fault
  EXPECT_EQ(tainted.status().code(), absl::StatusCode::kFailedPrecondition);
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_TRUE(others[i].Write(theirs[i], 0, "fedcba9876543210").ok()) << i;
    EXPECT_EQ(others[i].Synchronize(), absl::OkStatus()) << i;
    EXPECT_EQ(others[i].Read(theirs[i], 0, 16).value_or(""), "fedcba9876543210") << i;
  }
  absl::Status faulted = session_->Synchronize();
  EXPECT_EQ(faulted.code(), absl::StatusCode::kUnavailable) << faulted;
  EXPECT_THAT(std::string(faulted.message()), HasSubstr("Segmentation fault"));
  EXPECT_TRUE(session_->Synchronize().ok()) << "reported once";
}

// A session that launches on and on without synchronizing: its stream keeps a bounded
// record of those launches, and the first failure among them is still reported.
TEST_F(KernelTest, AFaultIsReportedAfterHundredsOfLaunchesWithoutASynchronize) {
  if (!OnCpu()) GTEST_SKIP() << "on a GPU a fault costs the context: see the next test";
  std::string wild = MustCompile(kWildPointer, "wild");
  std::string idle = MustCompile("extern \"C\" __global__ void idle(int n) {}\n", "idle");
  Buffer out = Zeros(16);
  ASSERT_TRUE(session_->Launch(wild, {MakeDim3(1), MakeDim3(1)},
                               {BufferArgument(out, v1::ACCESS_WRITE)})
                  .ok());
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(session_->Launch(idle, {MakeDim3(1), MakeDim3(1)}, {Int32Argument(i)}).ok())
        << i;
  }
  absl::Status faulted = session_->Synchronize();
  EXPECT_EQ(faulted.code(), absl::StatusCode::kUnavailable) << faulted;
  EXPECT_THAT(std::string(faulted.message()), HasSubstr("Segmentation fault"));
  EXPECT_TRUE(session_->Synchronize().ok()) << "reported once";
}

TEST_F(KernelTest, AFaultingKernelRestartsTheDaemonWhichServesAgain) {
  if (OnCpu()) GTEST_SKIP() << "the CPU driver contains faults in its executor: see above";
  OpenBystander();
  std::string wild = MustCompile(kWildPointer, "wild");
  Buffer out = Zeros(16);
  ASSERT_TRUE(session_->Launch(wild, {MakeDim3(1), MakeDim3(1)},
                               {BufferArgument(out, v1::ACCESS_WRITE)})
                  .ok());
  absl::Status faulted = session_->Synchronize();
  EXPECT_EQ(faulted.code(), absl::StatusCode::kUnavailable) << faulted;
  EXPECT_EQ(bystander_->Synchronize().code(), absl::StatusCode::kUnavailable);

  // No context on the device can be made again in this process (Note [Device loss] in
  // server/core/device_worker.h): the daemon drains and exits for its service manager
  // to start it again, and the new one runs kernels.
  EXPECT_EQ(daemon_->AwaitExit(), 75);
  EXPECT_THAT(daemon_->StderrText(), HasSubstr("a device was lost for good"));
  StartDaemon();
  ExpectKernelsRun(Zeros(sizeof(float)));
}

TEST_F(KernelTest, SubmitRunsABatchInOrderWithCompileAndLaunch) {
  grpc::ClientContext context;
  auto stream = client_->stub().Submit(&context);
  const std::string token = session_->token();
  v1::SubmitRequest first;
  uint64_t sequence = 100;
  auto add = [&](v1::SubmitRequest& batch) {
    v1::Command* command = batch.add_commands();
    command->set_sequence(sequence++);
    return command;
  };
  v1::CompileRequest* compile = add(first)->mutable_compile();
  compile->set_session(token);
  compile->set_source(std::string(kVectorAdd) + "// batch\n");
  compile->set_entry_point("vector_add");
  for (int i = 0; i < 3; ++i) {
    v1::AllocateRequest* allocate = add(first)->mutable_allocate();
    allocate->set_session(token);
    allocate->set_size_bytes(4 * sizeof(float));
  }
  ASSERT_TRUE(stream->Write(first));
  v1::SubmitResponse replies;
  ASSERT_TRUE(stream->Read(&replies));
  ASSERT_EQ(replies.replies_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(replies.replies(i).sequence(), 100u + i);
    EXPECT_EQ(replies.replies(i).status().code(), 0) << replies.replies(i).status().message();
  }
  std::string kernel = replies.replies(0).compile().kernel_id();
  uint64_t a = replies.replies(1).allocate().buffer();
  uint64_t b = replies.replies(2).allocate().buffer();
  uint64_t c = replies.replies(3).allocate().buffer();

  v1::SubmitRequest second;
  for (auto [buffer, values] : {std::pair{a, std::vector<float>{1, 2, 3, 4}},
                                std::pair{b, std::vector<float>{10, 20, 30, 40}}}) {
    v1::WriteRequest* write = add(second)->mutable_write();
    write->mutable_header()->set_session(token);
    write->mutable_header()->set_buffer(buffer);
    write->mutable_header()->set_inline_size_bytes(16);
    write->set_data(ToBytes(values));
  }
  v1::LaunchRequest* launch = add(second)->mutable_launch();
  launch->set_session(token);
  launch->set_kernel_id(kernel);
  *launch->mutable_grid() = MakeDim3(1);
  *launch->mutable_block() = MakeDim3(4);
  launch->mutable_args()->Add()->mutable_buffer()->set_buffer(a);
  launch->mutable_args()->Add()->mutable_buffer()->set_buffer(b);
  launch->mutable_args()->Add()->mutable_buffer()->set_buffer(c);
  launch->mutable_args()->Add()->mutable_scalar()->set_i32(4);
  v1::ReadRequest* read = add(second)->mutable_read();
  read->set_session(token);
  read->set_buffer(c);
  read->set_size_bytes(16);
  v1::FreeRequest* bogus = add(second)->mutable_free();
  bogus->set_session(token);
  bogus->set_buffer(987654);
  ASSERT_TRUE(stream->Write(second));
  ASSERT_TRUE(stream->Read(&replies));
  ASSERT_EQ(replies.replies_size(), 5);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(replies.replies(i).status().code(), 0) << i << ": "
                                                     << replies.replies(i).status().message();
  }
  EXPECT_EQ(FromBytes<float>(replies.replies(3).read().data()),
            (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(replies.replies(4).status().code(), static_cast<int>(absl::StatusCode::kNotFound));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Note [Overlapping batches], through the daemon: the batch after one that waits for a
// long kernel runs while that kernel still runs, and is answered after it.
TEST_F(KernelTest, ABatchRunsWhileTheOneBeforeWaitsForItsKernel) {
  const std::string spin = MustCompile(kernels::kSpin, "spin");
  absl::StatusOr<Session> other = client_->OpenSession(0, "kernel-test-other");
  ASSERT_TRUE(other.ok()) << other.status();
  grpc::ClientContext context;
  auto stream = client_->stub().Submit(&context);
  v1::SubmitRequest first;  // a kernel of 3 s or more (under the 5 s limit), and a synchronize
  v1::Command* command = first.add_commands();
  command->set_sequence(1);
  v1::LaunchRequest* launch = command->mutable_launch();
  launch->set_session(session_->token());
  launch->set_kernel_id(spin);
  *launch->mutable_grid() = MakeDim3(1);
  *launch->mutable_block() = MakeDim3(1);
  *launch->add_args() = Int64Argument(3'000'000'000);
  command = first.add_commands();
  command->set_sequence(2);
  command->mutable_synchronize()->set_session(session_->token());
  v1::SubmitRequest second;  // another session's allocation
  command = second.add_commands();
  command->set_sequence(3);
  command->mutable_allocate()->set_session(other->token());
  command->mutable_allocate()->set_size_bytes(4096);
  ASSERT_TRUE(stream->Write(first));
  ASSERT_TRUE(stream->Write(second));
  stream->WritesDone();
  // The allocation is made while the first batch's kernel is still queued on its stream.
  while (true) {
    absl::StatusOr<v1::GetStatsResponse> stats = other->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    if (stats->session().buffers() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  absl::StatusOr<v1::GetStatsResponse> spinning = session_->Stats();
  ASSERT_TRUE(spinning.ok()) << spinning.status();
  EXPECT_EQ(spinning->session().queued_commands(), 1u)
      << "the second batch ran only after the first one's kernel ended";
  std::vector<uint64_t> sequences;
  v1::SubmitResponse replies;
  while (stream->Read(&replies)) {
    EXPECT_TRUE(replies.batch_done());
    for (const v1::CommandReply& reply : replies.replies()) {
      EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
      sequences.push_back(reply.sequence());
    }
  }
  EXPECT_EQ(sequences, (std::vector<uint64_t>{1, 2, 3})) << "answered in the batches' order";
  EXPECT_TRUE(stream->Finish().ok());
}

// Launches back to back that each print more than a launch keeps: the executor's
// answers for them exceed what one datagram of its socket holds, and every launch still
// succeeds.
TEST_F(KernelTest, ABatchOfLoudLaunchesSucceedsWhole) {
  if (!OnCpu()) GTEST_SKIP() << "GPU kernels print to the daemon's standard output";
  const std::string id = MustCompile(R"(#include <stdio.h>
    extern "C" __global__ void loud(int lines) {
      for (int i = 0; i < lines; ++i) printf("%0100d\n", i);
    })",
                                     "loud");
  v1::SubmitRequest batch;
  constexpr int kLaunches = 40;
  for (int i = 0; i < kLaunches; ++i) AddLaunch(batch, i, id, 1000);
  v1::Command* synchronize = batch.add_commands();
  synchronize->set_sequence(kLaunches);
  synchronize->mutable_synchronize()->set_session(session_->token());
  v1::SubmitResponse replies = SubmitOnce(batch);
  ASSERT_EQ(replies.replies_size(), kLaunches + 1);
  ExpectAllOk(replies);
  EXPECT_TRUE(absl::StrContains(replies.replies(kLaunches).synchronize().kernel_output(),
                                "output cut"));
}

// Launches of one kernel in a row share its lookup: each of a run of launches of a kernel
// nobody compiled is refused, and the compiled kernel's launches around them run.
TEST_F(KernelTest, ABatchRefusesEachLaunchOfAnUncompiledKernel) {
  const std::string compiled = MustCompile("extern \"C\" __global__ void idle(int n) {}\n", "idle");
  const std::string unknown(compiled.size(), 'a');
  ASSERT_NE(unknown, compiled);
  v1::SubmitRequest batch;
  const std::vector<std::string> kernels = {compiled, unknown, unknown, compiled};
  for (size_t i = 0; i < kernels.size(); ++i) AddLaunch(batch, i, kernels[i], 0);
  v1::SubmitResponse replies = SubmitOnce(batch);
  ASSERT_EQ(replies.replies_size(), 4);
  for (int i : {0, 3}) EXPECT_EQ(replies.replies(i).status().code(), 0) << i;
  for (int i : {1, 2}) {
    EXPECT_EQ(replies.replies(i).status().code(), grpc::StatusCode::FAILED_PRECONDITION) << i;
    EXPECT_THAT(replies.replies(i).status().message(), HasSubstr("is not compiled")) << i;
  }
}

TEST_F(KernelTest, OneSubmitRoundTripAllocatesWritesLaunchesReadsAndFrees) {
  const std::string token = session_->token();
  v1::SubmitRequest batch;
  auto add = [&](uint64_t sequence) {
    v1::Command* command = batch.add_commands();
    command->set_sequence(sequence);
    return command;
  };
  v1::CompileRequest* compile = add(1)->mutable_compile();
  compile->set_session(token);
  compile->set_source(std::string(kVectorAdd) + "// one round trip\n");
  compile->set_entry_point("vector_add");
  const std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40};
  for (uint64_t sequence : {2, 3, 4}) {
    v1::AllocateRequest* allocate = add(sequence)->mutable_allocate();
    allocate->set_session(token);
    allocate->set_size_bytes(4 * sizeof(float));
  }
  for (auto [ref, values] : {std::pair{uint64_t{2}, a}, std::pair{uint64_t{3}, b}}) {
    v1::WriteRequest* write = add(10 + ref)->mutable_write();
    write->mutable_header()->set_session(token);
    write->mutable_header()->set_buffer_ref(ref);
    write->mutable_header()->set_inline_size_bytes(16);
    write->set_data(ToBytes(values));
  }
  // The kernel id is the compile cache's content hash: ask for it with a unary compile
  // of the same source first (a memory hit in the batch).
  absl::StatusOr<v1::CompileResponse> compiled =
      session_->Compile(compile->source(), "vector_add");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string* kernel = &compiled->kernel_id();
  v1::LaunchRequest* launch = add(20)->mutable_launch();
  launch->set_session(token);
  launch->set_kernel_id(*kernel);
  launch->mutable_grid()->set_x(1);   // y and z unset: 1, as in CUDA
  launch->mutable_block()->set_x(4);
  for (uint64_t ref : {2, 3, 4}) launch->add_args()->mutable_buffer()->set_buffer_ref(ref);
  launch->mutable_args(0)->mutable_buffer()->set_access(v1::ACCESS_READ);
  launch->mutable_args(1)->mutable_buffer()->set_access(v1::ACCESS_READ);
  launch->mutable_args(2)->mutable_buffer()->set_access(v1::ACCESS_WRITE);
  launch->add_args()->mutable_scalar()->set_i32(4);
  v1::ReadRequest* read = add(30)->mutable_read();
  read->set_session(token);
  read->set_buffer_ref(4);
  read->set_size_bytes(16);
  for (uint64_t ref : {2, 3, 4}) {
    v1::FreeRequest* free = add(40 + ref)->mutable_free();
    free->set_session(token);
    free->set_buffer_ref(ref);
  }
  v1::SubmitResponse replies = SubmitOnce(batch);
  ASSERT_EQ(replies.replies_size(), batch.commands_size());
  ExpectAllOk(replies);
  EXPECT_EQ(replies.replies(0).compile().kernel_id(), *kernel);
  const auto& params = replies.replies(0).compile().params();
  ASSERT_EQ(params.size(), 4);
  EXPECT_TRUE(params[0].read_only() && params[1].read_only()) << "const float* a, b";
  EXPECT_FALSE(params[2].read_only()) << "float* c";
  EXPECT_EQ(FromBytes<float>(replies.replies(7).read().data()),
            (std::vector<float>{11, 22, 33, 44}));
  absl::StatusOr<v1::GetStatsResponse> stats = session_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->session().buffers(), 0u) << "every buffer freed by reference";
}

}  // namespace
}  // namespace gpucmd
