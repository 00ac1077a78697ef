#include "driver/cpu/executor_protocol.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

LaunchHeader Header() {
  LaunchHeader header{};
  header.magic = kExecutorMagic;
  header.grid = {4, 2, 1};
  header.block = {32, 1, 1};
  header.dynamic_shared_memory_bytes = 128;
  header.reply_within_ms = 7;
  return header;
}

// `bytes` copied to 8-byte aligned storage, as the executor receives a datagram.
class Received {
 public:
  explicit Received(const std::string& bytes) : words_(bytes.size() / 8 + 1), size_(bytes.size()) {
    std::memcpy(words_.data(), bytes.data(), bytes.size());
  }
  absl::Span<const std::byte> span() const {
    return {reinterpret_cast<const std::byte*>(words_.data()), size_};
  }

 private:
  std::vector<uint64_t> words_;
  size_t size_;
};

TEST(ExecutorProtocolTest, LaunchesComeBackAsTheyWereAppended) {
  std::string datagram;
  const std::vector<uint64_t> args = {1, 0xffffffffffffffff, 42};
  const std::vector<DeviceRange> ranges = {{0x1000, 64}, {0x2000, 8}};
  AppendLaunch(Header(), "/modules/abc.so", args, ranges, datagram);
  AppendLaunch(Header(), "/m/a.so", {}, {}, datagram);  // a path of 7 bytes: padded to 8
  EXPECT_EQ(datagram.size(), LaunchBytes(15, 3, 2) + LaunchBytes(7, 0, 0));

  Received received(datagram);
  std::vector<PackedLaunch> launches;
  ASSERT_TRUE(ParseLaunches(received.span(), launches));
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].module_path, "/modules/abc.so");
  EXPECT_EQ(std::vector<uint64_t>(launches[0].args.begin(), launches[0].args.end()), args);
  ASSERT_EQ(launches[0].ranges.size(), 2u);
  EXPECT_EQ(launches[0].ranges[1].address, 0x2000u);
  EXPECT_EQ(launches[0].ranges[1].size, 8u);
  EXPECT_EQ(launches[0].header.grid.x, 4u);
  EXPECT_EQ(launches[0].header.block.x, 32u);
  EXPECT_EQ(launches[0].header.dynamic_shared_memory_bytes, 128u);
  EXPECT_EQ(launches[0].header.reply_within_ms, 7u);
  EXPECT_EQ(launches[1].module_path, "/m/a.so");
  EXPECT_TRUE(launches[1].args.empty());
  EXPECT_TRUE(launches[1].ranges.empty());
}

TEST(ExecutorProtocolTest, AnEmptyLaunchTakesAboutAHundredBytes) {
  std::string datagram;
  AppendLaunch(Header(), "/var/lib/gpucmd/modules/0123456789abcdef0123456789abcdef.so",
               std::vector<uint64_t>{0}, {}, datagram);
  EXPECT_LE(datagram.size(), 128u);
}

TEST(ExecutorProtocolTest, DatagramsThatBreakTheProtocolAreRefused) {
  std::string good;
  AppendLaunch(Header(), "/m/a.so", std::vector<uint64_t>{1, 2}, {}, good);
  std::vector<PackedLaunch> launches;

  // Cut short anywhere.
  for (size_t size = 1; size < good.size(); ++size) {
    EXPECT_FALSE(ParseLaunches(Received(good.substr(0, size)).span(), launches)) << size;
  }
  // Bytes left over after the last launch.
  EXPECT_FALSE(ParseLaunches(Received(good + "x").span(), launches));

  auto with_header = [&](auto change) {
    LaunchHeader header;
    std::memcpy(&header, good.data(), sizeof(header));
    change(header);
    std::string changed = good;
    std::memcpy(changed.data(), &header, sizeof(header));
    return ParseLaunches(Received(changed).span(), launches);
  };
  EXPECT_FALSE(with_header([](LaunchHeader& h) { h.magic = 0; }));
  EXPECT_FALSE(with_header([](LaunchHeader& h) { h.path_bytes = kMaxModulePathBytes; }));
  EXPECT_FALSE(with_header([](LaunchHeader& h) { h.arg_count = kMaxKernelArgs + 1; }));
  EXPECT_FALSE(with_header([](LaunchHeader& h) { h.range_count = kMaxKernelArgs + 1; }));
  EXPECT_FALSE(with_header([](LaunchHeader& h) { h.arg_count = 3; }));  // past the end
  EXPECT_TRUE(with_header([](LaunchHeader&) {}));

  // More launches than one message may carry.
  std::string many;
  for (int i = 0; i <= kMaxLaunchesPerMessage; ++i) AppendLaunch(Header(), "/m/a.so", {}, {}, many);
  EXPECT_FALSE(ParseLaunches(Received(many).span(), launches));

  // Stored unaligned: the launches would point at misaligned arguments.
  std::vector<uint64_t> words(good.size() / 8 + 2);
  auto* unaligned = reinterpret_cast<std::byte*>(words.data()) + 1;
  std::memcpy(unaligned, good.data(), good.size());
  EXPECT_FALSE(ParseLaunches({unaligned, good.size()}, launches));
}

TEST(ExecutorProtocolTest, LaunchesAtTheirLimitsFitTheLargestDatagram) {
  std::string datagram;
  const std::string path(kMaxModulePathBytes - 1, 'p');
  const std::vector<uint64_t> args(kMaxKernelArgs, 9);
  const std::vector<DeviceRange> ranges(kMaxKernelArgs, DeviceRange{0x1000, 1});
  for (int i = 0; i < kMaxLaunchesPerMessage; ++i) AppendLaunch(Header(), path, args, ranges, datagram);
  EXPECT_EQ(datagram.size(), kMaxLaunchDatagramBytes);
  Received received(datagram);
  std::vector<PackedLaunch> launches;
  ASSERT_TRUE(ParseLaunches(received.span(), launches));
  EXPECT_EQ(launches.size(), static_cast<size_t>(kMaxLaunchesPerMessage));
  EXPECT_EQ(launches.back().module_path, path);
}

TEST(ExecutorProtocolTest, RepliesComeBackAsTheyWereAppended) {
  std::string datagram;
  AppendReply(0, "", "hello\n", datagram);
  AppendReply(10, "kernel assertion failed: x", "", datagram);
  std::vector<PackedReply> replies;
  ASSERT_TRUE(ParseReplies({reinterpret_cast<const std::byte*>(datagram.data()), datagram.size()},
                           2, replies));
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].code, 0);
  EXPECT_EQ(replies[0].output, "hello\n");
  EXPECT_EQ(replies[1].code, 10);
  EXPECT_EQ(replies[1].message, "kernel assertion failed: x");
  EXPECT_TRUE(replies[1].output.empty());
}

TEST(ExecutorProtocolTest, RepliesAreCutToTheirLimits) {
  std::string datagram;
  AppendReply(13, std::string(2000, 'm'), std::string(kMaxLaunchOutputBytes + 5, 'o'), datagram);
  EXPECT_EQ(datagram.size(), ReplyBytes(std::string(2000, 'm'),
                                        std::string(kMaxLaunchOutputBytes + 5, 'o')));
  std::vector<PackedReply> replies;
  ASSERT_TRUE(ParseReplies({reinterpret_cast<const std::byte*>(datagram.data()), datagram.size()},
                           1, replies));
  EXPECT_EQ(replies[0].message.size(), kMaxReplyMessageBytes);
  EXPECT_EQ(replies[0].output.size(), kMaxLaunchOutputBytes);
}

TEST(ExecutorProtocolTest, ReplyDatagramsThatBreakTheProtocolAreRefused) {
  std::string good;
  AppendReply(0, "", "out", good);
  std::vector<PackedReply> replies;
  auto parse = [&](const std::string& datagram, size_t at_most) {
    return ParseReplies({reinterpret_cast<const std::byte*>(datagram.data()), datagram.size()},
                        at_most, replies);
  };
  EXPECT_TRUE(parse(good, 1));
  EXPECT_FALSE(parse(good + good, 1));  // more than were asked for
  for (size_t size = 1; size < good.size(); ++size) EXPECT_FALSE(parse(good.substr(0, size), 1));
  std::string wrong_magic = good;
  wrong_magic[0] ^= 1;
  EXPECT_FALSE(parse(wrong_magic, 1));
  LaunchReply oversized;
  std::memcpy(&oversized, good.data(), sizeof(oversized));
  oversized.output_bytes = kMaxLaunchOutputBytes + 1;
  std::string too_long = good;
  std::memcpy(too_long.data(), &oversized, sizeof(oversized));
  too_long.append(kMaxLaunchOutputBytes, 'o');
  EXPECT_FALSE(parse(too_long, 1));
}

}  // namespace
}  // namespace gpucmd
