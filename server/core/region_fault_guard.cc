#include "server/core/region_fault_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <utility>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"

namespace gpucmd {
namespace {

// One guarded range; `begin` is 0 when the slot is free. Written by Guard and the
// destructor (under `SlotsMutex`), read by the handler without a lock: `begin` is set
// last and cleared first.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> lost{false};
};

std::array<Slot, GuardedRange::kCapacity>& Slots() {
  static auto* slots = new std::array<Slot, GuardedRange::kCapacity>();
  return *slots;
}

Mutex& SlotsMutex() {
  static auto* mutex = new Mutex();
  return *mutex;
}

// SIGBUS's action before the handler was installed: what a fault outside every region
// gets.
struct sigaction previous_action;

void OnBusError(int, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : Slots()) {
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin) continue;
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    if (address >= end) continue;
    if (mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
      break;
    }
    slot.lost.store(true, std::memory_order_release);
    return;  // the faulting access runs again, on the zero pages
  }
  // Not a region: the access faults again and meets the action from before (by default,
  // the end of the process).
  sigaction(SIGBUS, &previous_action, nullptr);
}

void InstallHandler() {
  struct sigaction action {};
  action.sa_sigaction = OnBusError;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &previous_action);
}

}  // namespace

absl::StatusOr<GuardedRange> GuardedRange::Guard(void* address, uint64_t bytes) {
  std::array<Slot, kCapacity>& slots = Slots();  // made before the handler may read it
  static absl::once_flag installed;
  absl::call_once(installed, InstallHandler);
  MutexLock lock(&SlotsMutex());
  for (size_t i = 0; i < kCapacity; ++i) {
    if (slots[i].begin.load(std::memory_order_relaxed) != 0) continue;
    const auto begin = reinterpret_cast<uintptr_t>(address);
    slots[i].lost.store(false, std::memory_order_relaxed);
    slots[i].end.store(begin + bytes, std::memory_order_relaxed);
    slots[i].begin.store(begin, std::memory_order_release);
    return GuardedRange(i);
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("the daemon maps ", kCapacity, " shared-memory regions already"));
}

GuardedRange::GuardedRange(GuardedRange&& other) noexcept
    : slot_(std::exchange(other.slot_, kCapacity)) {}

GuardedRange::~GuardedRange() {
  if (slot_ == kCapacity) return;
  MutexLock lock(&SlotsMutex());
  Slot& slot = Slots()[slot_];
  slot.begin.store(0, std::memory_order_release);
  slot.end.store(0, std::memory_order_relaxed);
}

bool GuardedRange::lost() const {
  return slot_ != kCapacity && Slots()[slot_].lost.load(std::memory_order_acquire);
}

}  // namespace gpucmd
