#include "server/core/compile_cache.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "base/thread_name.h"

namespace gpucmd {
namespace {

// What a compile request holds while it waits: its source, entry point and options.
uint64_t SourceBytes(const KernelSource& kernel) {
  uint64_t bytes = kernel.source.size() + kernel.entry_point.size();
  for (const std::string& option : kernel.options) bytes += option.size();
  return bytes;
}

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

// The SHA-256 of `files`' bytes, each length-prefixed.
std::string FingerprintOf(const std::vector<std::string>& files) {
  std::string bytes;
  for (const std::string& file : files) {
    const std::string contents = ReadFileOrEmpty(file);
    absl::StrAppend(&bytes, contents.size(), ":", contents, ";");
  }
  return Sha256Hex(bytes);
}

}  // namespace

std::unique_ptr<CompileCache> CompileCache::Create(const Options& options, ModuleStore modules,
                                                   BackendCompiler compiler) {
  return std::unique_ptr<CompileCache>(
      new CompileCache(options, std::move(modules), std::move(compiler)));
}

CompileCache::CompileCache(const Options& options, ModuleStore modules, BackendCompiler compiler)
    : options_(options),
      toolchain_(FingerprintOf(options.toolchain_files)),
      modules_(std::move(modules)),
      compiler_(std::move(compiler)),
      client_share_(std::max(1, options.workers / 2)) {
  SweepStore();
  for (int i = 0; i < std::max(1, options.workers); ++i) {
    workers_.emplace_back([this] {
      NameThisThread("gpucmd-compile");
      Work();
    });
  }
}

CompileCache::~CompileCache() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    work_ready_.NotifyAll();
  }
  for (std::thread& worker : workers_) worker.join();
}

KernelId CompileCache::IdFor(const KernelSource& kernel) const {
  // Length-prefixed fields: no two different inputs hash the same text.
  std::string key;
  for (const std::string& field :
       {options_.driver, options_.architecture, toolchain_, kernel.entry_point, kernel.source}) {
    absl::StrAppend(&key, field.size(), ":", field, ";");
  }
  for (const std::string& option : kernel.options) absl::StrAppend(&key, option.size(), ":", option, ";");
  return KernelId{Sha256Hex(key)};
}

void CompileCache::Compile(uint64_t client, KernelSource kernel,
                           absl::AnyInvocable<void(absl::StatusOr<Result>)> done) {
  KernelId id = IdFor(kernel);
  std::optional<absl::StatusOr<Result>> answer;
  {
    MutexLock lock(&mutex_);
    if (auto it = compiled_.find(id.hex); it != compiled_.end()) {
      ++memory_hits_;
      answer = Result{it->second, true};
    } else if (auto failure = failed_.find(id.hex); failure != failed_.end()) {
      answer = failure->second;
    }
  }
  if (!answer) {
    if (absl::StatusOr<CompiledKernel> disk = LoadFromDisk(id); disk.ok()) {
      answer = Result{*std::move(disk), true};
    }
  }
  if (!answer) {
    MutexLock lock(&mutex_);
    const uint64_t source_bytes = SourceBytes(kernel);
    auto same = joined_.find(id.hex);  // the same kernel on its way already
    absl::Status admitted = same != joined_.end() ? AdmitWaiting(source_bytes)
                                                  : AdmitQueued(client, source_bytes);
    if (admitted.ok()) {
      waiting_source_bytes_ += source_bytes;
      Waiter waiter{std::move(done), source_bytes};
      if (same != joined_.end()) {
        same->second.push_back(std::move(waiter));
      } else {
        Enqueue(client, Job{std::move(kernel), std::move(id), std::move(waiter)});
      }
      return;
    }
    answer = std::move(admitted);
  }
  done(*std::move(answer));
}

absl::Status CompileCache::AdmitQueued(uint64_t client, uint64_t source_bytes) const {
  RETURN_IF_ERROR(AdmitWaiting(source_bytes));
  if (pending_ >= options_.max_pending) {
    return absl::ResourceExhaustedError(
        absl::StrCat("compile queue is full (", options_.max_pending, " pending)"));
  }
  auto jobs = clients_.find(client);
  if (jobs != clients_.end() && jobs->second.pending.size() >= options_.max_pending_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this session has ", jobs->second.pending.size(), " compiles queued, its limit is ",
        options_.max_pending_per_client));
  }
  return absl::OkStatus();
}

void CompileCache::Enqueue(uint64_t client, Job job) {
  ClientJobs& jobs = clients_[client];
  if (jobs.pending.empty()) ready_.push_back(client);
  joined_[job.id.hex];
  jobs.pending.push_back(std::move(job));
  ++pending_;
  work_ready_.NotifyAll();
}

void CompileCache::Remember(const KernelId& id, absl::StatusOr<CompiledKernel> kernel) {
  if (compiled_.contains(id.hex) || failed_.contains(id.hex)) return;
  // The entry's strings; a fixed cost for the rest of it and its place in the maps.
  constexpr uint64_t kEntryBytes = 256;
  uint64_t bytes = kEntryBytes + id.hex.size();
  if (kernel.ok()) {
    bytes += kernel->log.size();
    for (const KernelParam& param : *kernel->params) {
      bytes += kEntryBytes + param.declared_type.size();
    }
    compiled_.emplace(id.hex, *std::move(kernel));
  } else {
    bytes += kernel.status().message().size();
    failed_.emplace(id.hex, kernel.status());
  }
  remembered_.emplace_back(id.hex, bytes);
  remembered_bytes_ += bytes;
  while (remembered_bytes_ > options_.max_remembered_bytes && remembered_.size() > 1) {
    auto& [forgotten, forgotten_bytes] = remembered_.front();
    compiled_.erase(forgotten);
    failed_.erase(forgotten);
    remembered_bytes_ -= forgotten_bytes;
    remembered_.pop_front();
  }
}

absl::StatusOr<CompiledKernel> CompileCache::LoadFromDisk(const KernelId& id) {
  absl::StatusOr<ModuleStore::Module> module = modules_.Find(id);
  if (!module.ok()) {
    return absl::NotFoundError(absl::StrCat("kernel ", id.hex, " was never compiled"));
  }
  CompiledKernel kernel{id, ShareKernelParams(std::move(module->params)), ""};
  MutexLock lock(&mutex_);
  ++disk_hits_;
  Remember(id, kernel);
  return kernel;
}

absl::StatusOr<CompiledKernel> CompileCache::Lookup(const KernelId& id) {
  {
    MutexLock lock(&mutex_);
    if (auto it = compiled_.find(id.hex); it != compiled_.end()) return it->second;
    if (auto it = failed_.find(id.hex); it != failed_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("kernel ", id.hex, " failed to compile: ", it->second.message()));
    }
  }
  return LoadFromDisk(id);
}

absl::StatusOr<SharedKernelParams> CompileCache::ParamsOf(const KernelId& id) {
  {
    MutexLock lock(&mutex_);
    if (auto it = compiled_.find(id.hex); it != compiled_.end()) return it->second.params;
  }
  ASSIGN_OR_RETURN(CompiledKernel kernel, Lookup(id));  // failed, on disk, or never compiled
  return std::move(kernel.params);
}

absl::StatusOr<CompileCache::CompileLog> CompileCache::LogOf(const KernelId& id) {
  {
    MutexLock lock(&mutex_);
    if (auto it = failed_.find(id.hex); it != failed_.end()) {
      return CompileLog{.failed = true, .log = std::string(it->second.message())};
    }
  }
  ASSIGN_OR_RETURN(CompiledKernel kernel, Lookup(id));
  return CompileLog{.failed = false, .log = std::move(kernel.log)};
}

std::optional<uint64_t> CompileCache::NextClient() const {
  for (uint64_t client : ready_) {
    if (stopping_ || clients_.at(client).running < client_share_) return client;
  }
  return std::nullopt;
}

void CompileCache::Work() {
  while (true) {
    Job job;
    uint64_t client = 0;
    {
      MutexLock lock(&mutex_);
      work_ready_.Await(&mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return (stopping_ && pending_ == 0) || NextClient().has_value();
      });
      std::optional<uint64_t> next = NextClient();
      if (!next) return;  // stopping, and nothing left
      client = *next;
      ClientJobs& jobs = clients_.at(client);
      job = std::move(jobs.pending.front());
      jobs.pending.pop_front();
      ++jobs.running;
      --pending_;
      ready_.erase(std::find(ready_.begin(), ready_.end(), client));
      if (!jobs.pending.empty()) ready_.push_back(client);  // its turn comes round again
      ++misses_;
    }
    Run(std::move(job));
    MutexLock lock(&mutex_);
    ClientJobs& jobs = clients_.at(client);
    --jobs.running;
    if (jobs.pending.empty() && jobs.running == 0) clients_.erase(client);
    work_ready_.NotifyAll();
  }
}

absl::Status CompileCache::AdmitWaiting(uint64_t source_bytes) const {
  if (waiting_source_bytes_ + source_bytes <= options_.max_waiting_source_bytes) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "compile requests waiting hold ", waiting_source_bytes_, " bytes of kernel source; this "
      "one's ", source_bytes, " would pass the daemon's limit of ",
      options_.max_waiting_source_bytes, " (compile.max_waiting_source_bytes)"));
}

void CompileCache::Run(Job job) {
  absl::StatusOr<Result> result = Build(job);
  std::vector<Waiter> joined;
  {
    MutexLock lock(&mutex_);
    if (result.ok()) {
      Remember(job.id, result->kernel);
    } else if (absl::IsInvalidArgument(result.status())) {  // the source's fault: remember it
      Remember(job.id, result.status());
    }
    if (auto it = joined_.find(job.id.hex); it != joined_.end()) {
      joined = std::move(it->second);
      joined_.erase(it);
    }
  }
  // Swept before anyone hears of the module: an answered compile finds the store within
  // its bound.
  if (result.ok()) CountCommitted(job.id);
  for (Waiter& waiter : joined) {
    if (result.ok()) {
      Answer(waiter, Result{result->kernel, /*cache_hit=*/true});
    } else {
      Answer(waiter, result.status());
    }
  }
  job.kernel = KernelSource();  // its copy of the source goes before its bytes are let go
  Answer(job.waiter, std::move(result));
}

void CompileCache::CountCommitted(const KernelId& id) {
  const uint64_t bytes = modules_.BytesOf(id);
  {
    MutexLock lock(&mutex_);
    store_bytes_ += bytes;
    if (store_bytes_ <= options_.max_cache_bytes || sweeping_) return;
  }
  SweepStore();
}

void CompileCache::SweepStore() {
  {
    MutexLock lock(&mutex_);
    if (sweeping_) return;
    sweeping_ = true;
  }
  ModuleStore::Swept swept =
      modules_.Sweep(options_.max_cache_bytes, options_.max_cache_bytes / 10 * 9);
  MutexLock lock(&mutex_);
  for (const KernelId& removed : swept.removed) compiled_.erase(removed.hex);
  store_bytes_ = swept.bytes_left;
  sweeping_ = false;
}

void CompileCache::Answer(Waiter& waiter, absl::StatusOr<Result> result) {
  waiter.done(std::move(result));
  MutexLock lock(&mutex_);
  waiting_source_bytes_ -= waiter.source_bytes;
}

absl::StatusOr<CompileCache::Result> CompileCache::Build(const Job& job) {
  ASSIGN_OR_RETURN(CompileOutput output, compiler_(job.kernel, modules_.ArtifactPath(job.id)));
  RETURN_IF_ERROR(modules_.Commit(job.id, job.kernel.entry_point, output.params));
  return Result{
      CompiledKernel{job.id, ShareKernelParams(std::move(output.params)), std::move(output.log)},
      false};
}

uint64_t CompileCache::memory_hits() const {
  MutexLock lock(&mutex_);
  return memory_hits_;
}

uint64_t CompileCache::disk_hits() const {
  MutexLock lock(&mutex_);
  return disk_hits_;
}

uint64_t CompileCache::misses() const {
  MutexLock lock(&mutex_);
  return misses_;
}

}  // namespace gpucmd
