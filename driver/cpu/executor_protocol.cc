#include "driver/cpu/executor_protocol.h"

#include <algorithm>
#include <cstring>

namespace gpucmd {
namespace {

constexpr size_t kPadding = 8;

void AppendBytes(const void* data, size_t size, std::string& datagram) {
  datagram.append(static_cast<const char*>(data), size);
}

// Reads the parts of a datagram in order, refusing to read past its end.
class Reader {
 public:
  explicit Reader(absl::Span<const std::byte> datagram) : datagram_(datagram) {}

  bool done() const { return at_ == datagram_.size(); }

  // The next `size` bytes, or null when fewer are left.
  const std::byte* Take(size_t size) {
    if (datagram_.size() - at_ < size) return nullptr;
    const std::byte* taken = datagram_.data() + at_;
    at_ += size;
    return taken;
  }

  template <typename T>
  bool TakeCopy(T& value) {
    const std::byte* bytes = Take(sizeof(T));
    if (bytes != nullptr) std::memcpy(&value, bytes, sizeof(T));
    return bytes != nullptr;
  }

 private:
  absl::Span<const std::byte> datagram_;
  size_t at_ = 0;
};

}  // namespace

void AppendLaunch(const LaunchHeader& header, absl::string_view module_path,
                  absl::Span<const uint64_t> args, absl::Span<const DeviceRange> ranges,
                  std::string& datagram) {
  LaunchHeader sized = header;
  sized.path_bytes = static_cast<uint32_t>(module_path.size());
  sized.arg_count = static_cast<uint32_t>(args.size());
  sized.range_count = static_cast<uint32_t>(ranges.size());
  AppendBytes(&sized, sizeof(sized), datagram);
  datagram.append(module_path.data(), module_path.size());
  datagram.append((kPadding - module_path.size() % kPadding) % kPadding, '\0');
  AppendBytes(args.data(), args.size() * sizeof(uint64_t), datagram);
  AppendBytes(ranges.data(), ranges.size() * sizeof(DeviceRange), datagram);
}

bool ParseLaunches(absl::Span<const std::byte> datagram, std::vector<PackedLaunch>& launches) {
  launches.clear();
  if (reinterpret_cast<uintptr_t>(datagram.data()) % alignof(uint64_t) != 0) return false;
  Reader reader(datagram);
  while (!reader.done()) {
    PackedLaunch launch;
    if (launches.size() == kMaxLaunchesPerMessage || !reader.TakeCopy(launch.header)) {
      return false;
    }
    const LaunchHeader& header = launch.header;
    if (header.magic != kExecutorMagic || header.path_bytes >= kMaxModulePathBytes ||
        header.arg_count > kMaxKernelArgs || header.range_count > kMaxKernelArgs) {
      return false;
    }
    const std::byte* path = reader.Take((header.path_bytes + kPadding - 1) / kPadding * kPadding);
    const std::byte* args = reader.Take(header.arg_count * sizeof(uint64_t));
    const std::byte* ranges = reader.Take(header.range_count * sizeof(DeviceRange));
    if (path == nullptr || args == nullptr || ranges == nullptr) return false;
    // Every part starts 8-byte aligned: the header and the padded path are multiples of 8.
    launch.module_path = absl::string_view(reinterpret_cast<const char*>(path), header.path_bytes);
    launch.args = {reinterpret_cast<const uint64_t*>(args), header.arg_count};
    launch.ranges = {reinterpret_cast<const DeviceRange*>(ranges), header.range_count};
    launches.push_back(launch);
  }
  return true;
}

void AppendReply(int32_t code, absl::string_view message, absl::string_view output,
                 std::string& datagram) {
  message = message.substr(0, kMaxReplyMessageBytes);
  output = output.substr(0, kMaxLaunchOutputBytes);
  const LaunchReply reply{kExecutorMagic, code, static_cast<uint32_t>(message.size()),
                          static_cast<uint32_t>(output.size())};
  AppendBytes(&reply, sizeof(reply), datagram);
  datagram.append(message.data(), message.size());
  datagram.append(output.data(), output.size());
}

size_t ReplyBytes(absl::string_view message, absl::string_view output) {
  return sizeof(LaunchReply) + std::min<size_t>(message.size(), kMaxReplyMessageBytes) +
         std::min<size_t>(output.size(), kMaxLaunchOutputBytes);
}

bool ParseReplies(absl::Span<const std::byte> datagram, size_t at_most,
                  std::vector<PackedReply>& replies) {
  replies.clear();
  Reader reader(datagram);
  while (!reader.done()) {
    LaunchReply reply;
    if (replies.size() == at_most || !reader.TakeCopy(reply)) return false;
    if (reply.magic != kExecutorMagic || reply.message_bytes > kMaxReplyMessageBytes ||
        reply.output_bytes > kMaxLaunchOutputBytes) {
      return false;
    }
    const std::byte* message = reader.Take(reply.message_bytes);
    const std::byte* output = reader.Take(reply.output_bytes);
    if (message == nullptr || output == nullptr) return false;
    replies.push_back(
        {reply.code, absl::string_view(reinterpret_cast<const char*>(message), reply.message_bytes),
         absl::string_view(reinterpret_cast<const char*>(output), reply.output_bytes)});
  }
  return true;
}

}  // namespace gpucmd
