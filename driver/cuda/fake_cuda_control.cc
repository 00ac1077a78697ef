#include "driver/cuda/fake_cuda_control.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

absl::StatusOr<FakeCudaControl> Load() {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  if (runfiles == nullptr) return absl::InternalError("TEST_SRCDIR is not set");
  std::string path = absl::StrCat(runfiles, "/gpucmdd/driver/cuda/fake/libcuda.so.1");
  // Once a library with the soname libcuda.so.1 is loaded, dlopen("libcuda.so.1")
  // returns it.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) return absl::InternalError(absl::StrCat("dlopen: ", dlerror()));
  FakeCudaControl control{};
  absl::Status missing;
  auto resolve = [&](const char* name, auto& slot) {
    void* symbol = dlsym(library, name);
    if (symbol == nullptr) missing.Update(absl::InternalError(absl::StrCat("no ", name)));
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol);
  };
  resolve("fake_cuda_set_device_count", control.set_device_count);
  resolve("fake_cuda_set_memory_pools", control.set_memory_pools);
  resolve("fake_cuda_async_allocations", control.async_allocations);
  resolve("fake_cuda_inject_sticky_error", control.inject_sticky_error);
  resolve("fake_cuda_events_created", control.events_created);
  resolve("fake_cuda_context_resets", control.context_resets);
  if (!missing.ok()) return missing;
  return control;
}

}  // namespace

absl::StatusOr<const FakeCudaControl*> LoadFakeCuda() {
  static const absl::StatusOr<FakeCudaControl>* const kControl =
      new absl::StatusOr<FakeCudaControl>(Load());
  if (!kControl->ok()) return kControl->status();
  return &**kControl;
}

}  // namespace gpucmd
