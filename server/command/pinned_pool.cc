#include "server/command/pinned_pool.h"

#include <bit>

namespace gpucmd {
namespace {

constexpr int kSmallestClassLog2 = 12;  // 4 KiB
constexpr int kClassCount = 40;

}  // namespace

PinnedPool::PinnedPool(AllocateFn allocate, FreeFn free, uint64_t max_cached_bytes)
    : allocate_(std::move(allocate)), free_(std::move(free)), max_cached_bytes_(max_cached_bytes) {
  MutexLock lock(&mutex_);
  idle_.resize(kClassCount);
}

PinnedPool::~PinnedPool() {
  MutexLock lock(&mutex_);
  for (auto& [number, allocation] : allocations_) free_(allocation.resource);
}

int PinnedPool::SizeClass(uint64_t size_bytes) {
  int log2 = size_bytes <= 1 ? 0 : 64 - std::countl_zero(size_bytes - 1);
  return std::max(log2, kSmallestClassLog2) - kSmallestClassLog2;
}

absl::StatusOr<PinnedPool::Lease> PinnedPool::Acquire(uint64_t size_bytes) {
  int size_class = SizeClass(size_bytes);
  uint64_t class_bytes = uint64_t{1} << (size_class + kSmallestClassLog2);
  MutexLock lock(&mutex_);
  uint64_t number;
  if (!idle_[size_class].empty()) {
    number = idle_[size_class].back();
    idle_[size_class].pop_back();
    cached_bytes_ -= class_bytes;
  } else {
    absl::StatusOr<HostResource> resource = allocate_(class_bytes);
    if (!resource.ok()) return resource.status();
    number = next_allocation_++;
    allocations_[number] = Allocation{*resource, false};
  }
  Allocation& allocation = allocations_[number];
  allocation.in_use = true;
  ++outstanding_count_;
  outstanding_bytes_ += class_bytes;
  return Lease{PinnedBinding{this, number}, allocation.resource};
}

void PinnedPool::Release(uint64_t number) {
  absl::AnyInvocable<void(uint64_t)>* observer = nullptr;
  {
    MutexLock lock(&mutex_);
    Allocation& allocation = allocations_.at(number);
    allocation.in_use = false;
    uint64_t class_bytes = allocation.resource.size_bytes;
    --outstanding_count_;
    outstanding_bytes_ -= class_bytes;
    if (cached_bytes_ + class_bytes > max_cached_bytes_) {
      FreeLocked(number);
    } else {
      idle_[SizeClass(class_bytes)].push_back(number);
      cached_bytes_ += class_bytes;
    }
    if (observer_) observer = &observer_;
  }
  // The observer is set once, before the pool is used concurrently (tests only).
  if (observer != nullptr) (*observer)(number);
}

void PinnedPool::FreeLocked(uint64_t number) {
  auto it = allocations_.find(number);
  free_(it->second.resource);
  allocations_.erase(it);
}

void PinnedPool::Trim() {
  MutexLock lock(&mutex_);
  for (std::vector<uint64_t>& idle : idle_) {
    for (uint64_t number : idle) FreeLocked(number);
    idle.clear();
  }
  cached_bytes_ = 0;
}

void PinnedPool::SetReleaseObserver(absl::AnyInvocable<void(uint64_t)> observer) {
  MutexLock lock(&mutex_);
  observer_ = std::move(observer);
}

uint64_t PinnedPool::outstanding_count() const {
  MutexLock lock(&mutex_);
  return outstanding_count_;
}

uint64_t PinnedPool::outstanding_bytes() const {
  MutexLock lock(&mutex_);
  return outstanding_bytes_;
}

uint64_t PinnedPool::cached_bytes() const {
  MutexLock lock(&mutex_);
  return cached_bytes_;
}

}  // namespace gpucmd
