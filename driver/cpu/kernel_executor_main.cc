// gpucmd-kernel-executor: runs client kernels for one CPU device, in a process of its
// own, so a kernel that faults or hangs takes down only this process.
//
//   gpucmd-kernel-executor MEMFD_FD SOCKET_FD BASE_ADDRESS SIZE WORKERS MODULE_DIRECTORY
//                          MEMORY_BYTES UID GID
//
// It maps the device's memory (the memfd) at the daemon's addresses, confines itself
// (Note [Sandbox] in base/sandbox.h: it may read the module directory and the system's
// libraries and nothing else, write no file, run no program, signal no process outside
// its sandbox), becomes user UID and group GID unless they are "-" (base/identity.h),
// installs a system-call allowlist that kills it on anything else (driver/cpu/
// executor_filter.h), and exits when the daemon goes (the daemon thread that started it
// ends: a parent-death signal; the daemon's end of its socket closes), then serves
// messages of launches from the socket (driver/cpu/executor_protocol.h), one launch at a
// time: blocks are spread over WORKERS threads, one block per thread at a time. A kernel without barriers runs a block's threads as a
// loop; one with __syncthreads runs each thread as a fiber (Boost.Context) that stays
// on its worker thread, switching at each barrier.

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "boost/context/fiber.hpp"
#include "boost/context/pooled_fixedsize_stack.hpp"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/types/span.h"
#include "base/batch_scheduling.h"
#include "base/identity.h"
#include "base/sandbox.h"
#include "driver/cpu/executor_filter.h"
#include "driver/cpu/executor_protocol.h"
#include "driver/launch.h"

namespace gpucmd {
namespace {

// CUDA gives a thread 1 KiB of stack by default; 64 KiB leaves room for host code.
constexpr size_t kFiberStackBytes = 64 << 10;

// Open descriptors a kernel may hold: the executor needs a handful (its socket, stdout,
// stderr, modules being loaded).
constexpr rlim_t kMaxDescriptors = 64;

struct Module {
  void* handle = nullptr;
  bool uses_barrier = false;
  void (*bind)(KernelThreadContext*) = nullptr;
  void (*entry)(void**) = nullptr;
  void (*run_block)(void**) = nullptr;
};

struct Launch {
  const Module* module;
  KernelDim3 grid;
  KernelDim3 block;
  uint32_t dynamic_shared_bytes;
  void* args[kMaxKernelArgs];
};

// One GPU thread running as a fiber, and what it waits for while suspended.
struct FiberThread {
  enum class Wait { kNothing, kBlockBarrier, kWarp };

  KernelThreadContext context;
  boost::context::fiber continuation;  // the fiber while suspended, or the scheduler
  bool done = false;
  Wait wait = Wait::kNothing;
  // The warp primitive it waits at (KernelThreadContext::warp), and then its result.
  int op = 0;
  uint32_t mask = 0;
  uint64_t value = 0;
  int arg = 0;
  int width = 32;
  uint64_t result = 0;
  // Where a failed assertion leaves the kernel: the fiber's start, on its own stack
  // (a __builtin_setjmp buffer).
  void* exit[5];
};

// Note [Failed assertions]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel's failed assert() (the module's __assert_fail) records its message for the
// launch and leaves the kernel at once: a fiber jumps back to its start on its own
// stack, a block run as a loop back to its runner; the destructors of the kernel's own
// frames do not run (kernels rarely have any). No further block starts, and the launch
// fails with the first message. The executor serves on.
class LaunchFailure {
 public:
  void Reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    message_.reset();
  }
  void Record(const char* message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!message_) message_ = message;
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // The first message, and clears the failure.
  std::optional<std::string> Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    failed_.store(false, std::memory_order_relaxed);
    return std::exchange(message_, std::nullopt);
  }

 private:
  std::mutex mutex_;
  std::optional<std::string> message_;
  std::atomic<bool> failed_{false};
};

// One launch runs at a time in an executor.
LaunchFailure launch_failure;

// What the running launch printed, up to kMaxLaunchOutputBytes.
KernelOutput launch_output(kMaxLaunchOutputBytes, "[output cut: a launch keeps 16 KiB]");

void PrintFromKernel(KernelThreadContext*, const char* text, uint32_t size) {
  launch_output.Append(absl::string_view(text, size));
}
// Where a failed assertion leaves a block run as a loop on this thread (a
// __builtin_setjmp buffer: the compiler's jumps make no system call, which the
// executor's filter would refuse).
thread_local void** loop_exit = nullptr;

[[noreturn]] void FailLaunch(KernelThreadContext* context, const char* message) {
  launch_failure.Record(message);
  if (context->scheduler != nullptr) {
    __builtin_longjmp(static_cast<FiberThread*>(context->scheduler)->exit, 1);
  }
  __builtin_longjmp(loop_exit, 1);
}

constexpr int kWarpSize = 32;

void SwitchToScheduler(KernelThreadContext* context) {
  auto* thread = static_cast<FiberThread*>(context->scheduler);
  thread->continuation = std::move(thread->continuation).resume();
}

void BlockBarrier(KernelThreadContext* context) {
  static_cast<FiberThread*>(context->scheduler)->wait = FiberThread::Wait::kBlockBarrier;
  SwitchToScheduler(context);
}

uint64_t WarpPrimitive(KernelThreadContext* context, int op, uint32_t mask, uint64_t value,
                       int arg, int width) {
  auto* thread = static_cast<FiberThread*>(context->scheduler);
  thread->wait = FiberThread::Wait::kWarp;
  thread->op = op;
  thread->mask = mask;
  thread->value = value;
  thread->arg = arg;
  thread->width = (width > 0 && width <= kWarpSize && (width & (width - 1)) == 0) ? width
                                                                                : kWarpSize;
  SwitchToScheduler(context);
  return thread->result;
}

// What warp primitive `lane` of `lanes` (the warp's threads from its first) gets, all of
// `group` having arrived with their values.
uint64_t WarpResult(const FiberThread* lanes, uint32_t group, int lane) {
  const FiberThread& self = lanes[lane];
  const int segment = lane & ~(self.width - 1);
  auto value_of = [&](int source) {
    return source >= 0 && source < kWarpSize && (group >> source & 1u) ? lanes[source].value
                                                                       : self.value;
  };
  uint64_t result = 0;
  switch (self.op) {
    case kWarpShuffle:
      return value_of(segment + (self.arg & (self.width - 1)));
    case kWarpShuffleUp:
      return (lane - segment) < self.arg ? self.value : value_of(lane - self.arg);
    case kWarpShuffleDown:
      return (lane - segment) + self.arg >= self.width ? self.value : value_of(lane + self.arg);
    case kWarpShuffleXor: {
      const int source = lane ^ self.arg;
      return source >= segment + self.width ? self.value : value_of(source);
    }
    case kWarpBallot:
    case kWarpAny:
    case kWarpAll:
      for (int l = 0; l < kWarpSize; ++l) {
        if ((group >> l & 1u) && lanes[l].value != 0) result |= uint64_t{1} << l;
      }
      if (self.op == kWarpAny) return result != 0;
      if (self.op == kWarpAll) return result == group;
      return result;
    case kWarpMatchAny:
      for (int l = 0; l < kWarpSize; ++l) {
        if ((group >> l & 1u) && lanes[l].value == self.value) result |= uint64_t{1} << l;
      }
      return result;
    default:
      return 0;
  }
}

// Whether each of `group`'s lanes waits for exactly its running lanes.
bool AllNameTheGroup(const FiberThread* lanes, int count, uint32_t group, uint32_t live) {
  for (int g = 0; g < count; ++g) {
    if ((group >> g & 1u) && ((lanes[g].mask | 1u << g) & live) != group) return false;
  }
  return true;
}

// Releases, in each warp, every group of waiting lanes whose mask's running lanes have
// all arrived at a warp primitive naming that group, and then, once none of its running
// lanes can go on, the lanes waiting to coalesce at one call site (kWarpCoalesce); true
// when one was.
bool ReleaseWarps(std::vector<FiberThread>& threads) {
  bool released = false;
  auto release = [&released](FiberThread* lanes, int count, uint32_t group, auto result_of) {
    for (int g = 0; g < count; ++g) {
      if (group >> g & 1u) lanes[g].result = result_of(g);
    }
    for (int g = 0; g < count; ++g) {
      if (group >> g & 1u) lanes[g].wait = FiberThread::Wait::kNothing;
    }
    released = true;
  };
  for (uint64_t first = 0; first < threads.size(); first += kWarpSize) {
    FiberThread* lanes = &threads[first];
    const int count = static_cast<int>(std::min<uint64_t>(kWarpSize, threads.size() - first));
    uint32_t live = 0, waiting = 0;
    for (int l = 0; l < count; ++l) {
      if (!lanes[l].done) live |= 1u << l;
      if (lanes[l].wait == FiberThread::Wait::kWarp && lanes[l].op != kWarpCoalesce) {
        waiting |= 1u << l;
      }
    }
    for (int l = 0; l < count; ++l) {
      if (!(waiting >> l & 1u)) continue;
      const uint32_t group = (lanes[l].mask | 1u << l) & live;
      if ((group & ~waiting) != 0) continue;  // some of its lanes are elsewhere still
      // Lanes at a primitive with other lanes (in another branch) wait for those.
      if (!AllNameTheGroup(lanes, count, group, live)) continue;
      release(lanes, count, group, [&](int g) { return WarpResult(lanes, group, g); });
      waiting &= ~group;
    }
    uint32_t blocked = 0, coalescing = 0;
    for (int l = 0; l < count; ++l) {
      if (lanes[l].wait != FiberThread::Wait::kNothing) blocked |= 1u << l;
      if (lanes[l].wait == FiberThread::Wait::kWarp && lanes[l].op == kWarpCoalesce) {
        coalescing |= 1u << l;
      }
    }
    if (coalescing == 0 || (live & ~blocked) != 0) continue;  // others may reach it yet
    // The earliest call site first (kWarpCoalesce's value orders sites by line): lanes
    // waiting at a later one may be ahead of the others, which would reach it too.
    uint64_t site = ~uint64_t{0};
    for (int l = 0; l < count; ++l) {
      if (coalescing >> l & 1u) site = std::min(site, lanes[l].value);
    }
    uint32_t group = 0;
    for (int l = 0; l < count; ++l) {
      if ((coalescing >> l & 1u) && lanes[l].value == site) group |= 1u << l;
    }
    release(lanes, count, group, [group](int) { return uint64_t{group}; });
  }
  return released;
}

KernelDim3 Unflatten(uint64_t index, const KernelDim3& extent) {
  return {static_cast<unsigned>(index % extent.x),
          static_cast<unsigned>(index / extent.x % extent.y),
          static_cast<unsigned>(index / (uint64_t{extent.x} * extent.y))};
}

void RunBlockAsLoop(const Launch& launch, KernelDim3 block_idx, void* shared) {
  KernelThreadContext context{};
  context.block_idx = block_idx;
  context.block_dim = launch.block;
  context.grid_dim = launch.grid;
  context.dynamic_shared = shared;
  context.fail = &FailLaunch;
  context.print = &PrintFromKernel;
  launch.module->bind(&context);
  void* exit[5];
  if (__builtin_setjmp(exit) == 0) {
    loop_exit = exit;
    launch.module->run_block(const_cast<void**>(launch.args));
  }
  loop_exit = nullptr;
}

// Runs a block's threads as fibers that meet where the kernel says: every thread runs
// until it waits (at __syncthreads, or at a warp primitive) or ends; then the waits that
// can end do (a warp primitive once its mask's running lanes all arrived, a barrier once
// every running thread of the block arrived), and the released threads run on. Waits
// that can never end (a barrier some threads skip) are all let go, so a kernel whose
// threads disagree ends instead of hanging.
void RunBlockAsFibers(const Launch& launch, KernelDim3 block_idx, void* shared,
                      std::vector<FiberThread>& threads,
                      boost::context::pooled_fixedsize_stack& stacks) {
  uint64_t count = uint64_t{launch.block.x} * launch.block.y * launch.block.z;
  threads.clear();
  threads.resize(count);
  std::vector<boost::context::fiber> fibers;
  fibers.reserve(count);
  for (uint64_t t = 0; t < count; ++t) {
    FiberThread& thread = threads[t];
    thread.context.thread_idx = Unflatten(t, launch.block);
    thread.context.block_idx = block_idx;
    thread.context.block_dim = launch.block;
    thread.context.grid_dim = launch.grid;
    thread.context.dynamic_shared = shared;
    thread.context.sync = &BlockBarrier;
    thread.context.warp = &WarpPrimitive;
    thread.context.fail = &FailLaunch;
    thread.context.print = &PrintFromKernel;
    thread.context.scheduler = &thread;
    fibers.emplace_back(std::allocator_arg, stacks,
                        [&launch, &thread](boost::context::fiber&& scheduler) {
                          thread.continuation = std::move(scheduler);
                          if (__builtin_setjmp(thread.exit) == 0) {
                            launch.module->entry(const_cast<void**>(launch.args));
                          }
                          thread.done = true;
                          return std::move(thread.continuation);
                        });
  }
  while (true) {
    bool running = false;
    for (uint64_t t = 0; t < count; ++t) {
      FiberThread& thread = threads[t];
      if (thread.done || thread.wait != FiberThread::Wait::kNothing) continue;
      launch.module->bind(&thread.context);
      fibers[t] = std::move(fibers[t]).resume();
      running = true;
    }
    bool waiting = false, all_at_barrier = true;
    for (const FiberThread& thread : threads) {
      if (thread.done) continue;
      waiting = true;
      all_at_barrier = all_at_barrier && thread.wait == FiberThread::Wait::kBlockBarrier;
    }
    if (!waiting) return;
    if (ReleaseWarps(threads)) continue;
    if (all_at_barrier || !running) {
      for (FiberThread& thread : threads) {
        thread.result = thread.value;
        thread.wait = FiberThread::Wait::kNothing;
      }
    }
  }
}

// Worker threads that stay alive between launches.
// What one thread needs to run blocks: the block's shared memory, and for kernels with
// barriers its fibers, whose stacks are reused block after block.
class BlockRunner {
 public:
  BlockRunner() : stacks_(kFiberStackBytes) {}

  // Runs blocks of `launch` taken from `next`, `chunk` consecutive ones at a time, until
  // `total` are taken.
  void RunBlocks(const Launch& launch, std::atomic<uint64_t>& next, uint64_t total,
                 uint64_t chunk) {
    shared_.assign(launch.dynamic_shared_bytes + 16, 0);
    for (uint64_t first; (first = next.fetch_add(chunk)) < total && !launch_failure.failed();) {
      const uint64_t end = std::min(total, first + chunk);
      for (uint64_t block = first; block < end && !launch_failure.failed(); ++block) {
        KernelDim3 block_idx = Unflatten(block, launch.grid);
        if (launch.module->uses_barrier) {
          RunBlockAsFibers(launch, block_idx, shared_.data(), fiber_threads_, stacks_);
        } else {
          RunBlockAsLoop(launch, block_idx, shared_.data());
        }
      }
    }
  }

 private:
  std::vector<unsigned char> shared_;
  std::vector<FiberThread> fiber_threads_;
  boost::context::pooled_fixedsize_stack stacks_;
};

// Worker threads running a launch's blocks. A one-block grid runs on the calling thread:
// waking the workers would cost more than the block. Each worker takes runs of
// consecutive blocks (about an eighth of its share at a time), so that it streams through
// contiguous memory where blocks touch consecutive data, as an elementwise kernel's do:
// taking one block at a time, the workers interleaved 1 KiB pieces of each 4 KiB page,
// which the hardware prefetchers do not follow, and an elementwise kernel ran at a
// quarter of the memory bandwidth a plain loop gets.
class BlockPool {
 public:
  explicit BlockPool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
  }

  ~BlockPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    start_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

  void Run(const Launch& launch) {
    const uint64_t total = uint64_t{launch.grid.x} * launch.grid.y * launch.grid.z;
    if (total == 1) {
      std::atomic<uint64_t> next{0};
      caller_.RunBlocks(launch, next, total, 1);
      return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    launch_ = &launch;
    next_block_ = 0;
    total_blocks_ = total;
    chunk_ = std::max<uint64_t>(1, total / (threads_.size() * kChunksPerWorker));
    busy_ = threads_.size();
    ++generation_;
    // Unlocked while waking them: a worker woken under the lock would only block on it.
    lock.unlock();
    start_.notify_all();
    lock.lock();
    done_.wait(lock, [this] { return busy_ == 0; });
  }

 private:
  void Work() {
    uint64_t seen = 0;
    BlockRunner runner;
    while (true) {
      const Launch* launch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return generation_ != seen || stopping_; });
        if (stopping_) return;
        seen = generation_;
        launch = launch_;
      }
      runner.RunBlocks(*launch, next_block_, total_blocks_, chunk_);
      bool last = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        last = --busy_ == 0;
      }
      if (last) done_.notify_all();
    }
  }

  BlockRunner caller_;  // the calling thread's, for one-block grids
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  const Launch* launch_ = nullptr;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  size_t busy_ = 0;
  static constexpr uint64_t kChunksPerWorker = 8;

  std::atomic<uint64_t> next_block_{0};
  uint64_t total_blocks_ = 0;
  uint64_t chunk_ = 1;
  std::vector<std::thread> threads_;
};

// How a launch ended: an absl::StatusCode and why.
struct Outcome {
  int code = 0;
  std::string message;
};

const Module* LoadModule(std::map<std::string, Module>& modules, const std::string& path,
                         std::string* error) {
  auto it = modules.find(path);
  if (it != modules.end()) return &it->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    *error = std::string("cannot load kernel module: ") + dlerror();
    return nullptr;
  }
  auto* version = static_cast<const int*>(dlsym(handle, "gpucmd_abi_version"));
  auto* barrier = static_cast<const int*>(dlsym(handle, "gpucmd_uses_barrier"));
  Module module{handle, barrier != nullptr && *barrier != 0,
                reinterpret_cast<void (*)(KernelThreadContext*)>(dlsym(handle, "gpucmd_bind")),
                reinterpret_cast<void (*)(void**)>(dlsym(handle, "gpucmd_entry")),
                reinterpret_cast<void (*)(void**)>(dlsym(handle, "gpucmd_run_block"))};
  if (version == nullptr || *version != kKernelAbiVersion || module.bind == nullptr ||
      module.entry == nullptr || module.run_block == nullptr) {
    dlclose(handle);
    *error = "kernel module does not match this executor's ABI";
    return nullptr;
  }
  return &modules.emplace(path, module).first->second;
}

// Kernels get `address_space_bytes` of address space in all (the device mapping
// included) and a few descriptors: a kernel that allocates without limit fails its
// allocations instead of taking the machine's memory.
void LimitResources(uint64_t address_space_bytes) {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // (Sanitizer runtimes reserve terabytes of shadow address space: tests go without.)
  struct rlimit memory = {address_space_bytes, address_space_bytes};
  setrlimit(RLIMIT_AS, &memory);
#endif
  struct rlimit descriptors = {kMaxDescriptors, kMaxDescriptors};
  setrlimit(RLIMIT_NOFILE, &descriptors);
}

// The module directory, reached through a descriptor opened before the executor gave
// up its identity: the unprivileged user need not be able to search the directory's
// parents (only the directory itself, and read the modules in it).
class ModuleDirectory {
 public:
  explicit ModuleDirectory(std::string path)
      : path_(std::move(path)), fd_(open(path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {}

  const std::string& path() const { return path_; }

  // `module`'s path through the descriptor when it lies in the directory.
  std::string Reachable(const std::string& module) const {
    std::string prefix = path_ + "/";
    if (fd_ < 0 || !absl::StartsWith(module, prefix)) return module;
    return "/proc/self/fd/" + std::to_string(fd_) + "/" + module.substr(prefix.size());
  }

 private:
  std::string path_;
  int fd_;
};

// Confines this process before any client code runs (and before any thread starts:
// Landlock binds the calling thread and what it creates): Landlock, then the identity
// (when given), then the parent-death signal (a change of identity clears it). The
// system-call filter, which allows none of those calls, follows once the executor's
// threads run (FilterSystemCalls).
absl::Status Confine(const ModuleDirectory& modules, const UnixIdentity* identity) {
  absl::StatusOr<Sandbox> sandbox = Sandbox::Prepare(
      {.read_only = {modules.path(), "/etc/ld.so.cache", "/usr/lib", "/usr/lib64", "/lib",
                     "/lib64"}});
  if (!sandbox.ok()) return sandbox.status();
  if (int error = sandbox->Enforce(); error != 0) {
    return absl::InternalError(std::string("cannot enter the sandbox: ") + std::strerror(error));
  }
  if (identity != nullptr) {
    if (int error = DropIdentity(*identity); error != 0) {
      return absl::InternalError(std::string("cannot become user ") +
                                 std::to_string(identity->uid) + ": " + std::strerror(error));
    }
  }
  // Killed when the daemon thread that started it (the device's stream thread) ends.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  return absl::OkStatus();
}

// The system-call filter (driver/cpu/executor_filter.h), on every thread: install once
// the executor's own threads run, since it allows no new one.
absl::Status FilterSystemCalls() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Sanitizer builds (tests only) need system calls of their runtimes (ptrace for the
  // leak checker, /proc for reports, threads) that no kernel gets: they keep Landlock
  // alone.
  return absl::OkStatus();
#else
  return InstallExecutorFilter();
#endif
}

// Ends this process when the daemon goes, however it goes and even while a kernel
// runs: the daemon's end of the socket closes with it. (Also when the daemon died before
// the parent-death signal was set.)
void ExitWithTheDaemon(int socket_fd) {
  std::thread([socket_fd] {
    pollfd hangup{.fd = socket_fd, .events = POLLRDHUP, .revents = 0};
    while (poll(&hangup, 1, -1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }).detach();
}

// Note [Launch-scoped device memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The executor maps all of its device's memory, which holds every session's buffers,
// but keeps the mapping inaccessible except for the running launch's argument buffers
// (host pages; the daemon never puts two sessions' slices on one host page). A kernel
// that reaches beyond them, into another session's buffer, faults: its launch fails as a
// device trap would, and the executor restarts. Before a launch runs, the window changes
// only where it must: pages the last launch had open and this one does not name are
// closed, pages it names that were closed are opened. A launch that repeats on the same
// buffers (the common loop) changes nothing; opening and closing 32 MiB every launch
// cost a third of the executor's time in an elementwise kernel.
class DeviceWindow {
 public:
  DeviceWindow(uintptr_t base, uint64_t size) : base_(base), end_(base + size) {}

  // Makes exactly the launch's ranges (clamped to the mapping, widened to whole pages)
  // accessible.
  void Expose(absl::Span<const DeviceRange> ranges) {
    std::vector<DeviceRange> wanted;
    for (const DeviceRange& range : ranges) wanted.push_back(PageRange(range));
    wanted = Disjoint(std::move(wanted));
    for (const DeviceRange& range : Subtract(open_, wanted)) Protect(range, PROT_NONE);
    for (const DeviceRange& range : Subtract(wanted, open_)) {
      Protect(range, PROT_READ | PROT_WRITE);
    }
    open_ = std::move(wanted);
  }

 private:
  static constexpr uintptr_t kPage = 4096;

  DeviceRange PageRange(const DeviceRange& range) const {
    uintptr_t start = std::max<uintptr_t>(range.address & ~(kPage - 1), base_);
    uintptr_t end = std::min<uintptr_t>((range.address + range.size + kPage - 1) & ~(kPage - 1),
                                        end_);
    return DeviceRange{start, end > start ? end - start : 0};
  }

  // `ranges` sorted, with overlapping and touching ones merged and empty ones dropped.
  static std::vector<DeviceRange> Disjoint(std::vector<DeviceRange> ranges) {
    std::sort(ranges.begin(), ranges.end(), [](const DeviceRange& a, const DeviceRange& b) {
      return a.address < b.address;
    });
    std::vector<DeviceRange> merged;
    for (const DeviceRange& range : ranges) {
      if (range.size == 0) continue;
      if (!merged.empty() && range.address <= merged.back().address + merged.back().size) {
        const uintptr_t end = std::max(merged.back().address + merged.back().size,
                                       range.address + range.size);
        merged.back().size = end - merged.back().address;
      } else {
        merged.push_back(range);
      }
    }
    return merged;
  }

  // The parts of `from` outside `minus` (both as Disjoint returns them).
  static std::vector<DeviceRange> Subtract(const std::vector<DeviceRange>& from,
                                           const std::vector<DeviceRange>& minus) {
    std::vector<DeviceRange> rest;
    size_t m = 0;
    for (const DeviceRange& range : from) {
      uintptr_t start = range.address;
      const uintptr_t end = range.address + range.size;
      while (m < minus.size() && minus[m].address + minus[m].size <= start) ++m;
      for (size_t k = m; k < minus.size() && minus[k].address < end && start < end; ++k) {
        if (minus[k].address > start) rest.push_back({start, minus[k].address - start});
        start = std::max(start, minus[k].address + minus[k].size);
      }
      if (start < end) rest.push_back({start, end - start});
    }
    return rest;
  }

  static void Protect(const DeviceRange& range, int protection) {
    if (mprotect(reinterpret_cast<void*>(range.address), range.size, protection) != 0) {
      std::fprintf(stderr, "gpucmd-kernel-executor: mprotect: %s\n", std::strerror(errno));
      std::_Exit(1);  // cannot uphold isolation: better no executor than a leaky one
    }
  }

  const uintptr_t base_;
  const uintptr_t end_;
  std::vector<DeviceRange> open_;  // as Disjoint returns them
};

// Runs one launch to completion; how it ended.
Outcome RunLaunch(const PackedLaunch& message, const ModuleDirectory& directory,
                  std::map<std::string, Module>& modules, BlockPool& pool, DeviceWindow& window) {
  std::string error;
  const Module* module =
      LoadModule(modules, directory.Reachable(std::string(message.module_path)), &error);
  if (module == nullptr) return {9 /* FAILED_PRECONDITION */, error};
  const LaunchHeader& header = message.header;
  Launch launch{module, header.grid, header.block, header.dynamic_shared_memory_bytes, {}};
  uint64_t slots[kMaxKernelArgs];  // the kernel's own copy of its arguments
  for (size_t i = 0; i < message.args.size(); ++i) {
    slots[i] = message.args[i];
    launch.args[i] = &slots[i];
  }
  window.Expose(message.ranges);
  launch_failure.Reset();
  pool.Run(launch);
  if (std::optional<std::string> failed = launch_failure.Take()) {
    return {10 /* ABORTED */, "kernel assertion failed: " + *failed};
  }
  return {};
}

// Serves messages of launches until the daemon closes the socket (0) or breaks the
// protocol (1); answers as driver/cpu/executor_protocol.h says.
int Serve(int socket_fd, int workers, const ModuleDirectory& directory, DeviceWindow& window) {
  BlockPool pool(workers);
  // Every thread of its own runs now: no other may start.
  if (absl::Status filtered = FilterSystemCalls(); !filtered.ok()) {
    std::fprintf(stderr, "gpucmd-kernel-executor: %s\n", std::string(filtered.message()).c_str());
    return 1;
  }
  std::map<std::string, Module> modules;
  // Received datagrams, 8-byte aligned as ParseLaunches needs; a word beyond the largest
  // the daemon sends, so that a longer one arrives cut and fails to parse.
  std::vector<uint64_t> received_words(kMaxLaunchDatagramBytes / sizeof(uint64_t) + 1);
  std::vector<PackedLaunch> launches;
  std::string replies;  // each a LaunchReply, its message and the output it counts
  auto answer = [&]() {
    const bool sent = send(socket_fd, replies.data(), replies.size(), MSG_NOSIGNAL) ==
                      static_cast<ssize_t>(replies.size());
    replies.clear();
    return sent;
  };
  // False when the replies so far had to go first and could not be sent.
  auto add_reply = [&](const Outcome& outcome) {
    const std::string output = launch_output.Take();
    if (replies.size() + ReplyBytes(outcome.message, output) > kMaxReplyDatagramBytes &&
        !answer()) {
      return false;
    }
    AppendReply(outcome.code, outcome.message, output, replies);
    return true;
  };
  while (true) {
    const ssize_t received = recv(socket_fd, received_words.data(),
                                  received_words.size() * sizeof(uint64_t), 0);
    if (received == 0) return 0;  // the daemon closed the socket
    if (received < 0 ||
        !ParseLaunches({reinterpret_cast<const std::byte*>(received_words.data()),
                        static_cast<size_t>(received)},
                       launches)) {
      std::fprintf(stderr, "gpucmd-kernel-executor: malformed request\n");
      return 1;
    }
    auto answered = std::chrono::steady_clock::now();
    for (const PackedLaunch& launch : launches) {
      const auto now = std::chrono::steady_clock::now();
      if (!replies.empty() &&
          now - answered >= std::chrono::milliseconds(launch.header.reply_within_ms)) {
        if (!answer()) return 1;
        answered = now;
      }
      if (!add_reply(RunLaunch(launch, directory, modules, pool, window))) return 1;
    }
    if (!answer()) return 1;
  }
}

}  // namespace
}  // namespace gpucmd

int main(int argc, char** argv) {
  // Kernels are device work (Note [Device work yields to the control plane] in
  // base/batch_scheduling.h); the block workers started below inherit it.
  gpucmd::ScheduleThisThreadAsBatchWork();
  if (argc != 10) {
    std::fprintf(stderr,
                 "usage: gpucmd-kernel-executor MEMFD_FD SOCKET_FD BASE_ADDRESS SIZE WORKERS "
                 "MODULE_DIRECTORY MEMORY_BYTES UID GID\n");
    return 2;
  }
  int memfd = std::atoi(argv[1]);
  int socket_fd = std::atoi(argv[2]);
  uint64_t base = std::strtoull(argv[3], nullptr, 0);
  uint64_t size = std::strtoull(argv[4], nullptr, 0);
  int workers = std::max(1, std::atoi(argv[5]));
  std::optional<gpucmd::UnixIdentity> identity;
  if (std::strcmp(argv[8], "-") != 0) {
    identity = gpucmd::UnixIdentity{static_cast<uid_t>(std::strtoul(argv[8], nullptr, 10)),
                                    static_cast<gid_t>(std::strtoul(argv[9], nullptr, 10))};
  }
  // Inaccessible until a launch exposes its buffers (Note [Launch-scoped device memory]).
  void* mapped = mmap(reinterpret_cast<void*>(base), size, PROT_NONE,
                      MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, memfd, 0);
  if (mapped != reinterpret_cast<void*>(base)) {
    std::fprintf(stderr, "gpucmd-kernel-executor: cannot map device memory at %#lx: %s\n",
                 static_cast<unsigned long>(base), std::strerror(errno));
    return 1;
  }
  close(memfd);
  gpucmd::LimitResources(size + std::strtoull(argv[7], nullptr, 0));
  gpucmd::ModuleDirectory modules(argv[6]);
  if (absl::Status confined = gpucmd::Confine(modules, identity ? &*identity : nullptr);
      !confined.ok()) {
    std::fprintf(stderr, "gpucmd-kernel-executor: %s\n", std::string(confined.message()).c_str());
    return 1;
  }
  gpucmd::ExitWithTheDaemon(socket_fd);
  gpucmd::DeviceWindow window(base, size);
  return gpucmd::Serve(socket_fd, workers, modules, window);
}
