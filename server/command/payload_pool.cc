#include "server/command/payload_pool.h"

#include <memory>
#include <utility>

#include "base/huge_pages.h"

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
  MutexLock lock(&mutex_);
  if (cached_bytes_ + capacity > max_cached_bytes_) return;  // freed outside the lock
  cached_bytes_ += capacity;
  cached_.push_back(std::move(payload));
}

Bytes PayloadPool::TakeBytes(uint64_t size) {
  std::string payload = Take();
  ReserveInHugePages(payload, size);
  payload.resize(size);
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

}  // namespace gpucmd
