#include "driver/module_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"

namespace gpucmd {

absl::StatusOr<ModuleStore> ModuleStore::Open(std::string directory,
                                              std::string artifact_extension) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error || access(directory.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("module directory ", directory,
                                                      " is not writable",
                                                      error ? ": " + error.message() : ""));
  }
  return ModuleStore(std::move(directory), std::move(artifact_extension));
}

std::string ModuleStore::PathOf(const KernelId& id, absl::string_view suffix) const {
  return absl::StrCat(directory_, "/", id.hex, suffix);
}

std::string ModuleStore::ArtifactPath(const KernelId& id) const {
  return PathOf(id, artifact_extension_);
}

absl::Status ModuleStore::Commit(const KernelId& id, absl::string_view entry_point,
                                 const std::vector<KernelParam>& params) const {
  if (access(ArtifactPath(id).c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel ", id.hex, ": the compiler left no artifact at ", ArtifactPath(id)));
  }
  if (absl::Status entry = WriteFileAtomically(PathOf(id, ".entry"), entry_point);
      !entry.ok()) {
    return entry;
  }
  // The signature last: its presence marks the module complete.
  return WriteFileAtomically(PathOf(id, ".sig"), SerializeSignature(params));
}

absl::StatusOr<ModuleStore::Module> ModuleStore::Find(const KernelId& id) const {
  Module module{.artifact_path = ArtifactPath(id)};
  std::string signature = PathOf(id, ".sig");
  if (access(module.artifact_path.c_str(), R_OK) != 0 || access(signature.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("kernel ", id.hex, " has no module in ", directory_));
  }
  // Used now: a sweep keeps it over those used longer ago. (A store read by someone who
  // may not write it keeps its order.)
  (void)utimensat(AT_FDCWD, signature.c_str(), nullptr, 0);
  module.entry_point = std::string(absl::StripAsciiWhitespace(ReadFileOrEmpty(PathOf(id, ".entry"))));
  if (module.entry_point.empty()) {
    return absl::NotFoundError(
        absl::StrCat("kernel ", id.hex, " has no entry point in ", directory_));
  }
  absl::StatusOr<std::vector<KernelParam>> params =
      DeserializeSignature(ReadFileOrEmpty(signature));
  if (!params.ok()) return params.status();
  module.params = *std::move(params);
  return module;
}

uint64_t ModuleStore::BytesOf(const KernelId& id) const {
  uint64_t bytes = 0;
  for (const std::string& suffix : {artifact_extension_, std::string(".entry"), std::string(".sig")}) {
    struct stat status;
    if (stat(PathOf(id, suffix).c_str(), &status) == 0) bytes += status.st_size;
  }
  return bytes;
}

ModuleStore::Swept ModuleStore::Sweep(uint64_t max_bytes, uint64_t keep_bytes) const {
  // Every file by module: <id>.<suffix>, temporary files included.
  struct Files {
    uint64_t bytes = 0;
    bool committed = false;
    std::filesystem::file_time_type used;
    std::vector<std::filesystem::path> paths;
  };
  std::map<std::string, Files> modules;
  std::error_code error;
  for (const std::filesystem::directory_entry& entry :
       std::filesystem::directory_iterator(directory_, error)) {
    std::error_code entry_error;
    if (!entry.is_regular_file(entry_error)) continue;
    const std::string name = entry.path().filename().string();
    const size_t dot = name.find('.');
    if (dot == 0 || dot == std::string::npos) continue;
    Files& files = modules[name.substr(0, dot)];
    files.bytes += entry.file_size(entry_error);
    files.paths.push_back(entry.path());
    if (name.substr(dot) == ".sig") {
      files.committed = true;
      files.used = entry.last_write_time(entry_error);
    }
  }
  Swept swept;
  for (const auto& [stem, files] : modules) swept.bytes_left += files.bytes;
  if (swept.bytes_left <= max_bytes) return swept;
  std::vector<std::pair<std::string, Files*>> committed;
  for (auto& [stem, files] : modules) {
    if (files.committed) committed.emplace_back(stem, &files);
  }
  std::sort(committed.begin(), committed.end(),
            [](const auto& a, const auto& b) { return a.second->used < b.second->used; });
  for (auto& [stem, files] : committed) {
    if (swept.bytes_left <= keep_bytes) break;
    // The signature first: without it the module is not found while the rest goes.
    std::sort(files->paths.begin(), files->paths.end(), [](const auto& a, const auto& b) {
      return (a.extension() == ".sig") > (b.extension() == ".sig");
    });
    for (const std::filesystem::path& path : files->paths) std::filesystem::remove(path, error);
    swept.bytes_left -= files->bytes;
    swept.removed.push_back(KernelId{stem});
  }
  return swept;
}

absl::StatusOr<ModuleStore::Module> FindModule(const std::optional<ModuleStore>& modules,
                                               const KernelId& kernel) {
  if (!modules.has_value()) {
    return absl::FailedPreconditionError("this device has no module store: it runs no kernels");
  }
  absl::StatusOr<ModuleStore::Module> module = modules->Find(kernel);
  if (!module.ok()) return absl::FailedPreconditionError(module.status().message());
  return module;
}

}  // namespace gpucmd
