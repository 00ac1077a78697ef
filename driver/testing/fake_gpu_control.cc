#include "driver/testing/fake_gpu_control.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

absl::StatusOr<FakeGpuControl> Load(const std::string& runfile) {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  if (runfiles == nullptr) return absl::InternalError("TEST_SRCDIR is not set");
  std::string path = absl::StrCat(runfiles, "/gpucmdd/", runfile);
  // Once a library with the double's soname is loaded, the driver's own dlopen of that
  // name returns it.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) return absl::InternalError(absl::StrCat("dlopen: ", dlerror()));
  FakeGpuControl control{};
  absl::Status missing;
  auto resolve = [&](const char* name, auto& slot) {
    void* symbol = dlsym(library, name);
    if (symbol == nullptr) missing.Update(absl::InternalError(absl::StrCat("no ", name)));
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol);
  };
  resolve("fake_gpu_set_device_count", control.set_device_count);
  resolve("fake_gpu_set_memory_pools", control.set_memory_pools);
  resolve("fake_gpu_async_allocations", control.async_allocations);
  resolve("fake_gpu_events_created", control.events_created);
  resolve("fake_gpu_set_event_latency_us", control.set_event_latency_us);
  resolve("fake_gpu_sleeping_event_waits", control.sleeping_event_waits);
  resolve("fake_gpu_inject_sticky_error", control.inject_sticky_error);
  resolve("fake_gpu_inject_error_for_good", control.inject_error_for_good);
  resolve("fake_gpu_context_resets", control.context_resets);
  resolve("fake_gpu_refuse_host_registration", control.refuse_host_registration);
  resolve("fake_gpu_host_registrations", control.host_registrations);
  resolve("fake_gpu_pageable_copies", control.pageable_copies);
  if (!missing.ok()) return missing;
  return control;
}

}  // namespace

absl::StatusOr<const FakeGpuControl*> LoadFakeGpu(const std::string& runfile) {
  static std::mutex mutex;
  static auto* const loaded = new std::map<std::string, absl::StatusOr<FakeGpuControl>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded->find(runfile);
  if (it == loaded->end()) it = loaded->emplace(runfile, Load(runfile)).first;
  if (!it->second.ok()) return it->second.status();
  return &*it->second;
}

}  // namespace gpucmd
