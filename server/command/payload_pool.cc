#include "server/command/payload_pool.h"

#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/huge_pages.h"
#include "base/unfilled_resize.h"

namespace gpucmd {

std::string PayloadPool::Take() {
  MutexLock lock(&mutex_);
  if (cached_.empty()) return std::string();
  std::string payload = std::move(cached_.back());
  cached_.pop_back();
  cached_bytes_ -= payload.capacity();
  return payload;
}

void PayloadPool::Give(std::string payload) {
  const uint64_t capacity = payload.capacity();
  if (capacity < kMinCachedBytes) return;
  {
    MutexLock lock(&mutex_);
    if (cached_bytes_ + capacity <= max_cached_bytes_) {
      cached_bytes_ += capacity;
      cached_.push_back(std::move(payload));
      return;
    }
  }
  ReleaseLazily(payload);
  MutexLock lock(&mutex_);
  spare_.swap(payload);  // the previous spare is freed outside the lock
}

std::optional<std::string> PayloadPool::TakeCachedHolding(uint64_t size) {
  MutexLock lock(&mutex_);
  for (auto cached = cached_.rbegin(); cached != cached_.rend(); ++cached) {
    if (cached->capacity() < size) continue;
    std::string payload = std::move(*cached);
    cached_.erase(std::next(cached).base());
    cached_bytes_ -= payload.capacity();
    return payload;
  }
  return std::nullopt;
}

std::optional<std::string> PayloadPool::TakeSpare(uint64_t size) {
  MutexLock lock(&mutex_);
  if (spare_.capacity() < size || size <= spare_.capacity() / 2) return std::nullopt;
  return std::exchange(spare_, std::string());
}

void PayloadPool::Grow(std::string& payload, uint64_t size) {
  if (payload.capacity() >= size) return;
  std::optional<std::string> spare = TakeSpare(size);
  if (!spare) {
    ReserveInHugePages(payload, size);
    return;
  }
  spare->assign(payload);
  Give(std::exchange(payload, *std::move(spare)));
}

Bytes PayloadPool::TakeBytes(uint64_t size) {
  std::optional<std::string> held = TakeCachedHolding(size);
  if (!held) held = TakeSpare(size);
  std::string payload = held ? *std::move(held) : Take();
  // Its contents are the caller's to write: not copied into a larger allocation, nor
  // zero-filled where the memory held less before.
  if (payload.capacity() < size) payload.clear();
  ReserveInHugePages(payload, size);
  ResizeUnfilled(payload, size);
  return Wrap(std::move(payload));
}

Bytes PayloadPool::Wrap(std::string payload) {
  auto holder = std::make_unique<std::string>(std::move(payload));
  std::byte* data = reinterpret_cast<std::byte*>(holder->data());
  const size_t size = holder->size();
  return Bytes(data, size, [this, holder = std::move(holder)]() mutable {
    Give(std::move(*holder));
  });
}

uint64_t PayloadPool::cached_bytes() const {
  MutexLock lock(&mutex_);
  return cached_bytes_;
}

uint64_t PayloadPool::spare_bytes() const {
  MutexLock lock(&mutex_);
  return spare_.capacity() >= kMinCachedBytes ? spare_.capacity() : 0;
}

}  // namespace gpucmd
