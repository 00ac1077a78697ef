#include "server/core/compile_cache.h"

#include <atomic>
#include <fstream>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// A stand-in for a driver's compiler: "compiles" by writing the source to the artifact;
// sources containing "error" fail with a log. Counts its calls. Calls for kernels that
// `Hold` names wait until Release, so that tests can keep compiles in flight.
class FakeCompiler {
 public:
  CompileCache::BackendCompiler Function() {
    return [this](const KernelSource& kernel,
                  const std::string& artifact) -> absl::StatusOr<CompileOutput> {
      ++calls_;
      WaitIfHeld(kernel);
      if (kernel.source.find("error") != std::string::npos) {
        return absl::InvalidArgumentError("kernel.cu:1: error: broken");
      }
      std::ofstream(artifact) << kernel.source;
      return CompileOutput{{KernelParam{ParamKind::kBuffer, ScalarKind::kNone, "float* x"}},
                           "a warning"};
    };
  }
  int calls() const { return calls_; }

  // From now until Release, compiles of kernels `holds` accepts wait.
  void Hold(std::function<bool(const KernelSource&)> holds) {
    std::lock_guard<std::mutex> lock(mutex_);
    holds_ = std::move(holds);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    holds_ = nullptr;
    released_.notify_all();
  }
  // The compiles that were held (waiting or past).
  int held() const { return held_; }

 private:
  void WaitIfHeld(const KernelSource& kernel) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (holds_ == nullptr || !holds_(kernel)) return;
    ++held_;
    released_.wait(lock, [this] { return holds_ == nullptr; });
  }

  std::atomic<int> calls_{0};
  std::atomic<int> held_{0};
  std::mutex mutex_;
  std::condition_variable released_;
  std::function<bool(const KernelSource&)> holds_;
};

// Asks `cache` for `kernel` on behalf of `client`; the answer comes in the future.
std::future<absl::StatusOr<CompileCache::Result>> CompileLater(CompileCache& cache,
                                                               uint64_t client,
                                                               KernelSource kernel) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<CompileCache::Result>>>();
  std::future<absl::StatusOr<CompileCache::Result>> answer = promise->get_future();
  cache.Compile(client, std::move(kernel), [promise](absl::StatusOr<CompileCache::Result> result) {
    promise->set_value(std::move(result));
  });
  return answer;
}

absl::StatusOr<CompileCache::Result> CompileNow(CompileCache& cache, KernelSource kernel) {
  return CompileLater(cache, /*client=*/0, std::move(kernel)).get();
}

CompileCache::Options Options() {
  return {.driver = "cpu", .architecture = "x86_64", .workers = 2};
}

// A CPU-driver cache over the module store in the test's `name` directory.
std::unique_ptr<CompileCache> Create(const std::string& name, FakeCompiler& compiler,
                                     const CompileCache::Options& options = Options()) {
  absl::StatusOr<ModuleStore> modules =
      ModuleStore::Open(std::string(getenv("TEST_TMPDIR")) + "/" + name, ".so");
  EXPECT_TRUE(modules.ok()) << modules.status();
  return CompileCache::Create(options, *std::move(modules), compiler.Function());
}

TEST(CompileCacheTest, IdsHashEveryInput) {
  FakeCompiler compiler;
  std::unique_ptr<CompileCache> cache = Create("ids", compiler);
  KernelSource base{"src", "k", {"-DA"}};
  KernelId id = cache->IdFor(base);
  EXPECT_EQ(id.hex.size(), 64u);
  EXPECT_EQ(cache->IdFor(base), id);
  EXPECT_NE(cache->IdFor({"src", "k2", {"-DA"}}), id);
  EXPECT_NE(cache->IdFor({"src ", "k", {"-DA"}}), id);
  EXPECT_NE(cache->IdFor({"src", "k", {"-DB"}}), id);
  std::unique_ptr<CompileCache> other =
      Create("ids", compiler, {.driver = "cuda", .architecture = "sm_90"});
  EXPECT_NE(other->IdFor(base), id) << "driver and architecture are part of the id";
}

// A daemon whose front end or compiler changed (an upgrade) compiles again what its
// predecessor compiled; one with the same toolchain takes the module from disk.
TEST(CompileCacheTest, AChangedToolchainCompilesAgain) {
  const std::string tool = std::string(getenv("TEST_TMPDIR")) + "/front-end";
  const auto write_tool = [&tool](const std::string& bytes) { std::ofstream(tool) << bytes; };
  CompileCache::Options options = Options();
  options.toolchain_files = {tool};
  FakeCompiler compiler;
  KernelSource kernel{"extern \"C\" __global__ void k(float* x) {}", "k", {}};
  write_tool("front end, version 1");
  KernelId first;
  {
    std::unique_ptr<CompileCache> cache = Create("toolchain", compiler, options);
    absl::StatusOr<CompileCache::Result> compiled = CompileNow(*cache, kernel);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    first = compiled->kernel.id;
  }
  absl::StatusOr<CompileCache::Result> same =
      CompileNow(*Create("toolchain", compiler, options), kernel);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->cache_hit);
  EXPECT_EQ(same->kernel.id, first);
  write_tool("front end, version 2");
  std::unique_ptr<CompileCache> upgraded = Create("toolchain", compiler, options);
  EXPECT_NE(upgraded->IdFor(kernel), first);
  absl::StatusOr<CompileCache::Result> again = CompileNow(*upgraded, kernel);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->cache_hit);
  EXPECT_EQ(compiler.calls(), 2);
}

TEST(CompileCacheTest, MissThenMemoryHitThenDiskHitAfterRestart) {
  FakeCompiler compiler;
  KernelSource kernel{"extern \"C\" __global__ void k(float* x) {}", "k", {}};
  KernelId id;
  {
    std::unique_ptr<CompileCache> cache = Create("restart", compiler);
    absl::StatusOr<CompileCache::Result> first = CompileNow(*cache, kernel);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_FALSE(first->cache_hit);
    EXPECT_EQ(first->kernel.log, "a warning");
    absl::StatusOr<CompileCache::Result> second = CompileNow(*cache, kernel);
    EXPECT_TRUE(second->cache_hit);
    EXPECT_EQ(cache->memory_hits(), 1u);
    id = first->kernel.id;
  }
  std::unique_ptr<CompileCache> restarted = Create("restart", compiler);
  absl::StatusOr<CompiledKernel> found = restarted->Lookup(id);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->params->size(), 1u);
  absl::StatusOr<SharedKernelParams> params = restarted->ParamsOf(id);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(*params, found->params) << "a launch shares the cached parameters";
  EXPECT_EQ(restarted->ParamsOf(KernelId{std::string(64, 'a')}).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<ModuleStore::Module> module =
      ModuleStore::Open(std::string(getenv("TEST_TMPDIR")) + "/restart", ".so")->Find(id);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(module->entry_point, "k") << "the compile committed the module's entry point";
  absl::StatusOr<CompileCache::Result> again = CompileNow(*restarted, kernel);
  EXPECT_TRUE(again->cache_hit);
  EXPECT_EQ(compiler.calls(), 1) << "a restarted daemon must not compile again";
}

TEST(CompileCacheTest, FailuresAreRememberedWithTheirLog) {
  FakeCompiler compiler;
  std::unique_ptr<CompileCache> cache = Create("failures", compiler);
  KernelSource broken{"error here", "k", {}};
  absl::Status first = CompileNow(*cache, broken).status();
  EXPECT_EQ(first.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompileNow(*cache, broken).status(), first);
  EXPECT_EQ(compiler.calls(), 1);
  absl::Status lookup = cache->Lookup(cache->IdFor(broken)).status();
  EXPECT_EQ(lookup.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(lookup.message()), ::testing::HasSubstr("kernel.cu:1: error: broken"));
  EXPECT_EQ(cache->Lookup(KernelId{"00"}).status().code(), absl::StatusCode::kNotFound);
}

// Many clients starting the same program at once compile its kernel once.
TEST(CompileCacheTest, RequestsForAKernelBeingCompiledJoinThatCompile) {
  FakeCompiler compiler;
  compiler.Hold([](const KernelSource&) { return true; });
  std::unique_ptr<CompileCache> cache = Create("joined", compiler);
  std::vector<std::future<absl::StatusOr<CompileCache::Result>>> results;
  for (const char* source : {"good", "error"}) {
    for (uint64_t client = 0; client < 20; ++client) {
      results.push_back(CompileLater(*cache, client, {source, "k", {}}));
    }
  }
  compiler.Release();
  int hits = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    absl::StatusOr<CompileCache::Result> result = results[i].get();
    if (i < 20) {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->kernel.params->size(), 1u);
      hits += result->cache_hit;
    } else {
      EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
  EXPECT_EQ(compiler.calls(), 2) << "one compile per distinct kernel";
  EXPECT_EQ(hits, 19);
}

TEST(CompileCacheTest, OneClientsSlowCompilesDoNotHoldUpAnother) {
  // Client 1's compiles block until released; client 2's return at once.
  FakeCompiler compiler;
  compiler.Hold([](const KernelSource& kernel) { return kernel.entry_point == "slow"; });
  CompileCache::Options options = Options();
  options.max_pending_per_client = 3;
  std::unique_ptr<CompileCache> cache = Create("fair", compiler, options);
  std::vector<std::future<absl::StatusOr<CompileCache::Result>>> slow;
  auto compile_slow = [&](int i) {
    slow.push_back(CompileLater(*cache, 1, {"slow " + std::to_string(i), "slow", {}}));
  };
  compile_slow(0);
  while (compiler.held() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int i = 1; i < 4; ++i) compile_slow(i);  // queued: client 1 runs one at a time
  // A fourth queued compile is over its share of the queue: refused at once.
  absl::Status refused;
  cache->Compile(1, {"slow 4", "slow", {}},
                 [&refused](absl::StatusOr<CompileCache::Result> result) {
                   refused = result.status();
                 });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("compiles queued"));
  // Client 1 holds one worker at most; client 2's compile runs on the other meanwhile.
  absl::StatusOr<CompileCache::Result> fast_result =
      CompileLater(*cache, 2, {"fast", "fast", {}}).get();
  EXPECT_TRUE(fast_result.ok()) << fast_result.status();
  EXPECT_EQ(compiler.held(), 1) << "one client ran more than its share of the pool";
  compiler.Release();
  for (auto& result : slow) EXPECT_TRUE(result.get().ok());
  EXPECT_EQ(compiler.calls(), 5) << "the four slow compiles and the fast one ran";
}

// What memory keeps of compiled and failed kernels is bounded: the longest remembered
// go first; a compiled one comes back from disk, a failed one is unknown then.
TEST(CompileCacheTest, MemoryRemembersKernelsUpToItsBound) {
  FakeCompiler compiler;
  CompileCache::Options options = Options();
  options.max_remembered_bytes = 16 << 10;  // some 40 entries of this test's size
  std::unique_ptr<CompileCache> cache = Create("remembered", compiler, options);
  const KernelSource good{"good", "k", {}};
  ASSERT_TRUE(CompileNow(*cache, good).ok());
  const KernelSource first_failure{"error 0", "k", {}};
  EXPECT_FALSE(CompileNow(*cache, first_failure).ok());
  for (int i = 1; i < 200; ++i) {
    EXPECT_FALSE(CompileNow(*cache, {"error " + std::to_string(i), "k", {}}).ok());
  }
  EXPECT_EQ(cache->LogOf(cache->IdFor(first_failure)).status().code(),
            absl::StatusCode::kNotFound)
      << "the first failure is still remembered after 199 more";
  absl::StatusOr<CompileCache::CompileLog> latest =
      cache->LogOf(cache->IdFor({"error 199", "k", {}}));
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_TRUE(latest->failed);
  const uint64_t disk_hits = cache->disk_hits();
  absl::StatusOr<CompiledKernel> again = cache->Lookup(cache->IdFor(good));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->params->size(), 1u);
  EXPECT_EQ(cache->disk_hits(), disk_hits + 1) << "the compiled kernel came back from disk";
  EXPECT_EQ(compiler.calls(), 201);
  // Forgotten, a failing source fails again when compiled again.
  EXPECT_EQ(CompileNow(*cache, first_failure).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The module store on disk is swept back under its bound, the modules used longest ago
// first; a kernel swept away is forgotten, and compiling it again compiles it.
TEST(CompileCacheTest, TheStoreOnDiskIsSweptBackUnderItsBound) {
  FakeCompiler compiler;  // its artifacts hold the source: a megabyte each here
  CompileCache::Options options = Options();
  options.max_cache_bytes = 4 << 20;
  std::unique_ptr<CompileCache> cache = Create("swept", compiler, options);
  auto kernel = [](int i) {
    return KernelSource{std::to_string(i) + std::string(1 << 20, ' '), "k", {}};
  };
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(CompileNow(*cache, kernel(i)).ok()) << i;
    // Apart by more than a clock tick of the file system's timestamps (a jiffy), so that
    // their order on disk is the order they were compiled in.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // 5 MiB passed the bound: swept back to nine tenths of it, the oldest first.
  for (int i : {0, 1}) {
    EXPECT_EQ(cache->Lookup(cache->IdFor(kernel(i))).status().code(), absl::StatusCode::kNotFound)
        << i;
  }
  for (int i : {2, 3, 4}) EXPECT_TRUE(cache->Lookup(cache->IdFor(kernel(i))).ok()) << i;
  EXPECT_EQ(compiler.calls(), 5);
  EXPECT_TRUE(CompileNow(*cache, kernel(0)).ok());
  EXPECT_EQ(compiler.calls(), 6) << "a kernel swept away compiles again";

  // A store past a smaller bound is swept when a cache opens over it.
  cache.reset();
  options.max_cache_bytes = 2 << 20;
  std::unique_ptr<CompileCache> reopened = Create("swept", compiler, options);
  int found = 0;
  for (int i = 0; i < 5; ++i) found += reopened->Lookup(reopened->IdFor(kernel(i))).ok();
  EXPECT_EQ(found, 1);
}

// Every request that waits holds its source: together they are bounded, joined
// requests included (the same large source sent again and again joins the first), and
// the bytes come back once the requests are answered.
TEST(CompileCacheTest, SourcesOfWaitingRequestsAreBounded) {
  constexpr uint64_t kBudget = 1 << 20;
  FakeCompiler compiler;
  compiler.Hold([](const KernelSource&) { return true; });
  CompileCache::Options options = Options();
  options.max_waiting_source_bytes = kBudget;
  std::unique_ptr<CompileCache> cache = Create("waiting", compiler, options);
  std::vector<std::future<absl::StatusOr<CompileCache::Result>>> answers;
  auto compile = [&](uint64_t client, std::string source) {
    answers.push_back(CompileLater(*cache, client, {std::move(source), "k", {}}));
  };
  const std::string large(kBudget / 4, 'a');
  compile(1, large);
  compile(2, large);  // joins
  compile(3, large);  // joins: three quarters of the budget are held now
  compile(4, large);  // would join past the budget
  compile(5, std::string(kBudget / 4, 'b'));  // would queue past it
  compile(6, std::string(kBudget + 1, 'c'));  // more than the budget alone
  for (size_t refused = 3; refused < 6; ++refused) {
    if (answers[refused].wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ADD_FAILURE() << "request " << refused << " waits past the budget";
      continue;
    }
    absl::StatusOr<CompileCache::Result> answer = answers[refused].get();
    EXPECT_EQ(answer.status().code(), absl::StatusCode::kResourceExhausted) << refused;
    EXPECT_THAT(std::string(answer.status().message()),
                ::testing::HasSubstr("compile.max_waiting_source_bytes"));
  }
  compile(7, std::string(1000, 'd'));  // small enough to queue beside them
  compiler.Release();
  for (size_t answered : {0, 1, 2, 6}) {
    absl::StatusOr<CompileCache::Result> answer = answers[answered].get();
    EXPECT_TRUE(answer.ok()) << answered << ": " << answer.status();
  }
  EXPECT_EQ(compiler.calls(), 2) << "the joined requests compiled once";
  // Answered, they hold nothing: a source of most of the budget waits again.
  absl::StatusOr<CompileCache::Result> again =
      CompileNow(*cache, {std::string(kBudget - 100, 'e'), "k", {}});
  EXPECT_TRUE(again.ok()) << again.status();
}

}  // namespace
}  // namespace gpucmd
