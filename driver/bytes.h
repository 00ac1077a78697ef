#ifndef GPUCMDD_DRIVER_BYTES_H_
#define GPUCMDD_DRIVER_BYTES_H_

// Bytes: a move-only view of host memory plus the action that gives it back (to the
// pinned pool, or freeing an owned buffer) when the Bytes object dies. This is how
// staged host data is kept alive by a drop queue until the copy reading it completed.
// Bytes the device may copy from and into directly, without staging (pinned pool
// memory, a shared-memory region registered with the device), say so: pinned().
//
// HostRegistration: a host range registered with a device for direct copies, and the
// action that ends the registration when the object dies.
//
// Thread-safety: a Bytes object is owned by one thread at a time; its release action
// runs on whichever thread destroys it.

#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/types/span.h"

namespace gpucmd {

class Bytes {
 public:
  Bytes() = default;
  // `release` runs exactly once, when this object (or the one it is moved into) dies.
  Bytes(std::byte* data, size_t size, absl::AnyInvocable<void()> release)
      : data_(data), size_(size), release_(std::move(release)) {}

  // `size` bytes of fresh heap memory, not initialised: for a destination that is
  // overwritten whole (a read's copy), where zero-filling would be a wasted pass.
  static Bytes Uninitialized(size_t size) {
    auto* data = new std::byte[size];
    return Bytes(data, size, [data] { delete[] data; });
  }

  // Takes ownership of `owned`; the view covers its characters.
  static Bytes FromString(std::string owned) {
    auto* holder = new std::string(std::move(owned));
    return Bytes(reinterpret_cast<std::byte*>(holder->data()), holder->size(),
                 [holder] { delete holder; });
  }

  Bytes(Bytes&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        pinned_(std::exchange(other.pinned_, false)),
        release_(std::move(other.release_)) {
    other.release_ = nullptr;
  }
  Bytes& operator=(Bytes&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      pinned_ = std::exchange(other.pinned_, false);
      release_ = std::move(other.release_);
      other.release_ = nullptr;
    }
    return *this;
  }
  ~Bytes() { Release(); }

  // Marks these bytes as memory the device copies from and into directly.
  Bytes&& MarkPinned() && {
    pinned_ = true;
    return std::move(*this);
  }

  std::byte* data() const { return data_; }
  bool pinned() const { return pinned_; }
  size_t size() const { return size_; }
  absl::Span<std::byte> span() const { return {data_, size_}; }
  absl::Span<const std::byte> const_span() const { return {data_, size_}; }
  std::string ToString() const { return std::string(reinterpret_cast<const char*>(data_), size_); }

 private:
  void Release() {
    if (release_) release_();
    release_ = nullptr;
  }

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
  absl::AnyInvocable<void()> release_;
};

class HostRegistration {
 public:
  // Nothing to end: memory the device reaches without registering it.
  HostRegistration() = default;
  // `end` runs exactly once, when this object (or the one it is moved into) dies.
  explicit HostRegistration(absl::AnyInvocable<void()> end) : end_(std::move(end)) {}
  HostRegistration(HostRegistration&& other) noexcept : end_(std::move(other.end_)) {
    other.end_ = nullptr;
  }
  HostRegistration& operator=(HostRegistration&& other) noexcept {
    if (this != &other) {
      End();
      end_ = std::move(other.end_);
      other.end_ = nullptr;
    }
    return *this;
  }
  ~HostRegistration() { End(); }

 private:
  void End() {
    if (end_) end_();
    end_ = nullptr;
  }

  absl::AnyInvocable<void()> end_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_BYTES_H_
