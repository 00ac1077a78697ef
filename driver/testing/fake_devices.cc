#include "driver/testing/fake_devices.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace gpucmd::fake {
namespace {

struct Allocation {
  size_t bytes;
  int device;
};

using Clock = std::chrono::steady_clock;

// The event latency the double starts with (kEventLatencyVariable; 0 when unset).
std::chrono::microseconds InitialEventLatency() {
  const char* text = std::getenv(kEventLatencyVariable);
  return std::chrono::microseconds(text == nullptr ? 0 : std::strtoll(text, nullptr, 10));
}

struct Event {
  bool blocking_waits = false;
  Clock::time_point complete_at;  // the epoch until recorded: complete
};

struct StreamCallback {
  uintptr_t stream;
  int device;
  std::function<void(int error)> callback;
};

struct State {
  std::mutex mutex;
  int device_count = 1;
  bool memory_pools = true;
  int async_allocations = 0;
  int events_created = 0;
  std::chrono::microseconds event_latency = InitialEventLatency();
  std::map<uintptr_t, Event> events;
  int sleeping_event_waits = 0;
  // Streams' callbacks: when each stream's events waited for complete, its callbacks not
  // run yet, and the callbacks by when they are due (then by when they were added).
  std::map<uintptr_t, Clock::time_point> stream_ready_at;
  std::map<uintptr_t, int> stream_callbacks_left;
  std::map<std::pair<Clock::time_point, uint64_t>, StreamCallback> callbacks;
  uint64_t callbacks_added = 0;
  bool callback_thread_started = false;
  std::condition_variable callbacks_changed;
  uintptr_t next_handle = 0x1000;
  std::map<uintptr_t, Allocation> allocations;
  size_t allocated[kMaxDevices] = {};
  int sticky[kMaxDevices] = {};
  bool sticky_for_good[kMaxDevices] = {};
  int resets[kMaxDevices] = {};
  std::vector<std::string> functions;
  // Pinned host memory (allocations and registrations) by start: its size.
  std::map<uintptr_t, size_t> pinned_allocations;
  std::map<uintptr_t, size_t> registrations;
  bool refuse_host_registration = false;
  int pageable_copies = 0;
};

State& Get() {
  static State* const kState = new State();
  return *kState;
}

thread_local int current_device = 0;

// The range of `ranges` that holds [start, start + bytes), or end().
std::map<uintptr_t, size_t>::const_iterator Holding(const std::map<uintptr_t, size_t>& ranges,
                                                    uintptr_t start, size_t bytes) {
  auto it = ranges.upper_bound(start);
  if (it == ranges.begin()) return ranges.end();
  --it;
  return start + bytes <= it->first + it->second ? it : ranges.end();
}

// The double's callback thread: runs each stream callback when it is due.
void RunStreamCallbacks() {
  State& state = Get();
  std::unique_lock<std::mutex> lock(state.mutex);
  while (true) {
    if (state.callbacks.empty()) {
      state.callbacks_changed.wait(lock);
      continue;
    }
    auto first = state.callbacks.begin();
    if (Clock::now() < first->first.first) {
      state.callbacks_changed.wait_until(lock, first->first.first);
      continue;
    }
    StreamCallback due = std::move(first->second);
    state.callbacks.erase(first);
    lock.unlock();
    due.callback(StickyErrorOf(due.device));
    lock.lock();
    --state.stream_callbacks_left[due.stream];
    state.callbacks_changed.notify_all();
  }
}

int Clamp(int device) { return device < 0 ? 0 : (device >= kMaxDevices ? kMaxDevices - 1 : device); }

// When `event` completes, and whether waiting for it sleeps.
Event EventOf(uintptr_t event) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  auto it = Get().events.find(event);
  return it == Get().events.end() ? Event() : it->second;
}

}  // namespace

int DeviceCount() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().device_count;
}

void SetCurrentDevice(int device) { current_device = Clamp(device); }
int CurrentDevice() { return current_device; }

int StickyError() { return StickyErrorOf(current_device); }

int StickyErrorOf(int device) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().sticky[Clamp(device)];
}

void InjectStickyError(int device, int error, bool for_good) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().sticky[Clamp(device)] = error;
  Get().sticky_for_good[Clamp(device)] = for_good;
}

void ResetDevice(int device) {
  State& state = Get();
  std::lock_guard<std::mutex> lock(state.mutex);
  device = Clamp(device);
  for (auto it = state.allocations.begin(); it != state.allocations.end();) {
    if (it->second.device == device) {
      std::free(reinterpret_cast<void*>(it->first));
      it = state.allocations.erase(it);
    } else {
      ++it;
    }
  }
  state.allocated[device] = 0;
  if (!state.sticky_for_good[device]) state.sticky[device] = 0;
  ++state.resets[device];
}

void* AllocateDevice(size_t bytes) {
  State& state = Get();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.allocated[current_device] + bytes > kFakeDeviceBytes) return nullptr;
  void* memory = std::calloc(1, bytes == 0 ? 1 : bytes);
  if (memory == nullptr) return nullptr;
  state.allocations[reinterpret_cast<uintptr_t>(memory)] = Allocation{bytes, current_device};
  state.allocated[current_device] += bytes;
  return memory;
}

bool FreeDevice(void* pointer) {
  State& state = Get();
  std::lock_guard<std::mutex> lock(state.mutex);
  auto it = state.allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == state.allocations.end()) return false;
  state.allocated[it->second.device] -= it->second.bytes;
  state.allocations.erase(it);
  std::free(pointer);
  return true;
}

bool MemoryPools() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().memory_pools;
}

void CountAsyncAllocation() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  ++Get().async_allocations;
}

uintptr_t NewHandle() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return ++Get().next_handle;
}

void CreateEvent(uintptr_t event, bool blocking_waits) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  ++Get().events_created;
  Get().events[event] = Event{.blocking_waits = blocking_waits};
}

void RecordEvent(uintptr_t event) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().events[event].complete_at = Clock::now() + Get().event_latency;
}

bool EventComplete(uintptr_t event) { return Clock::now() >= EventOf(event).complete_at; }

void WaitForEvent(uintptr_t event) {
  const Event state = EventOf(event);
  if (state.blocking_waits) {
    if (Clock::now() < state.complete_at) {
      {
        std::lock_guard<std::mutex> lock(Get().mutex);
        ++Get().sleeping_event_waits;
      }
      std::this_thread::sleep_until(state.complete_at);
    }
    return;
  }
  while (Clock::now() < state.complete_at) {
  }
}

void DestroyEvent(uintptr_t event) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().events.erase(event);
}

void StreamWaitEvent(uintptr_t stream, uintptr_t event) {
  const Clock::time_point complete_at = EventOf(event).complete_at;
  std::lock_guard<std::mutex> lock(Get().mutex);
  Clock::time_point& ready_at = Get().stream_ready_at[stream];
  ready_at = std::max(ready_at, complete_at);
}

void AddStreamCallback(uintptr_t stream, std::function<void(int error)> callback) {
  State& state = Get();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.callback_thread_started) {
    std::thread(RunStreamCallbacks).detach();  // as long as the process: the state is too
    state.callback_thread_started = true;
  }
  const Clock::time_point due = std::max(Clock::now(), state.stream_ready_at[stream]);
  state.callbacks.emplace(std::make_pair(due, state.callbacks_added++),
                          StreamCallback{stream, current_device, std::move(callback)});
  ++state.stream_callbacks_left[stream];
  state.callbacks_changed.notify_all();
}

void WaitForStreamCallbacks(uintptr_t stream) {
  State& state = Get();
  std::unique_lock<std::mutex> lock(state.mutex);
  state.callbacks_changed.wait(lock, [&] { return state.stream_callbacks_left[stream] == 0; });
}

uintptr_t AddFunction(const std::string& entry_point) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().functions.push_back(entry_point);
  return Get().functions.size();
}

bool KnownFunction(uintptr_t function) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return function >= 1 && function <= Get().functions.size();
}

Trap TrapOf(uintptr_t function) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  if (function < 1 || function > Get().functions.size()) return Trap::kNone;
  const std::string& entry_point = Get().functions[function - 1];
  if (entry_point == kTrapEntryPoint) return Trap::kUntilReset;
  return entry_point == kFatalTrapEntryPoint ? Trap::kForGood : Trap::kNone;
}

void* AllocatePinnedHost(size_t bytes) {
  void* memory = std::malloc(bytes == 0 ? 1 : bytes);
  if (memory == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().pinned_allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  return memory;
}

void FreePinnedHost(void* pointer) {
  {
    std::lock_guard<std::mutex> lock(Get().mutex);
    Get().pinned_allocations.erase(reinterpret_cast<uintptr_t>(pointer));
  }
  std::free(pointer);
}

bool RegisterHost(void* pointer, size_t bytes) {
  State& state = Get();
  std::lock_guard<std::mutex> lock(state.mutex);
  const auto start = reinterpret_cast<uintptr_t>(pointer);
  if (state.refuse_host_registration || bytes == 0) return false;
  auto next = state.registrations.lower_bound(start);
  if (next != state.registrations.end() && next->first < start + bytes) return false;
  if (next != state.registrations.begin() && std::prev(next)->first + std::prev(next)->second > start) {
    return false;
  }
  state.registrations[start] = bytes;
  return true;
}

bool UnregisterHost(void* pointer) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().registrations.erase(reinterpret_cast<uintptr_t>(pointer)) == 1;
}

void NoteHostSide(const void* pointer, size_t bytes) {
  State& state = Get();
  std::lock_guard<std::mutex> lock(state.mutex);
  const auto start = reinterpret_cast<uintptr_t>(pointer);
  if (Holding(state.pinned_allocations, start, bytes) == state.pinned_allocations.end() &&
      Holding(state.registrations, start, bytes) == state.registrations.end()) {
    ++state.pageable_copies;
  }
}

void CopyRows(char* target, size_t target_pitch, const char* source, size_t source_pitch,
              size_t width, size_t height) {
  for (size_t row = 0; row < height; ++row) {
    std::memcpy(target + row * target_pitch, source + row * source_pitch, width);
  }
}

// Test controls (driver/testing/fake_gpu_control.h), with C names so that tests find them
// with dlsym. Call them before the driver creates backends, except the error injections.
extern "C" void fake_gpu_set_device_count(int count) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().device_count = count < 1 ? 1 : (count > kMaxDevices ? kMaxDevices : count);
}
extern "C" void fake_gpu_set_memory_pools(int supported) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().memory_pools = supported != 0;
}
extern "C" int fake_gpu_async_allocations() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().async_allocations;
}
extern "C" int fake_gpu_events_created() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().events_created;
}
extern "C" void fake_gpu_set_event_latency_us(int microseconds) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().event_latency = std::chrono::microseconds(microseconds);
}
extern "C" int fake_gpu_sleeping_event_waits() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().sleeping_event_waits;
}
extern "C" void fake_gpu_inject_sticky_error(int device, int error) {
  InjectStickyError(device, error);
}
extern "C" void fake_gpu_inject_error_for_good(int device, int error) {
  InjectStickyError(device, error, /*for_good=*/true);
}
extern "C" int fake_gpu_context_resets(int device) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().resets[Clamp(device)];
}
extern "C" void fake_gpu_refuse_host_registration(int refuse) {
  std::lock_guard<std::mutex> lock(Get().mutex);
  Get().refuse_host_registration = refuse != 0;
}
extern "C" int fake_gpu_host_registrations() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return static_cast<int>(Get().registrations.size());
}
extern "C" int fake_gpu_pageable_copies() {
  std::lock_guard<std::mutex> lock(Get().mutex);
  return Get().pageable_copies;
}

}  // namespace gpucmd::fake
