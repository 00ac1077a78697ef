#include "driver/module_store.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

std::string TempDirectory(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(ModuleStoreTest, CommittedModulesAreFoundWithTheirEntryAndSignature) {
  absl::StatusOr<ModuleStore> store = ModuleStore::Open(TempDirectory("modules"), ".cubin");
  ASSERT_TRUE(store.ok()) << store.status();
  KernelId id{"0123abcd"};
  EXPECT_EQ(store->Find(id).status().code(), absl::StatusCode::kNotFound);
  std::vector<KernelParam> params = {{ParamKind::kBuffer, ScalarKind::kNone, "float* out"},
                                     {ParamKind::kScalar, ScalarKind::kI32, "int n"}};
  absl::Status missing = store->Commit(id, "scale", params);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.message(), HasSubstr("no artifact"));

  std::ofstream(store->ArtifactPath(id)) << "image";
  ASSERT_TRUE(store->Commit(id, "scale", params).ok());
  absl::StatusOr<ModuleStore::Module> module = store->Find(id);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(module->artifact_path, TempDirectory("modules") + "/0123abcd.cubin");
  EXPECT_EQ(module->entry_point, "scale");
  ASSERT_EQ(module->params.size(), 2u);
  EXPECT_EQ(module->params[1].scalar, ScalarKind::kI32);
}

// A module `name` committed with a 1000-byte artifact, last used `seconds_ago`.
void CommitModule(const ModuleStore& store, const std::string& name, int seconds_ago) {
  const KernelId id{name};
  std::ofstream(store.ArtifactPath(id)) << std::string(1000, 'x');
  ASSERT_TRUE(store.Commit(id, "k", {}).ok());
  std::filesystem::last_write_time(store.directory() + "/" + name + ".sig",
                                   std::filesystem::file_time_type::clock::now() -
                                       std::chrono::seconds(seconds_ago));
}

TEST(ModuleStoreTest, SweepsRemoveTheModulesUsedLongestAgo) {
  absl::StatusOr<ModuleStore> store = ModuleStore::Open(TempDirectory("sweep"), ".so");
  ASSERT_TRUE(store.ok()) << store.status();
  for (auto [name, seconds_ago] : {std::pair{"a", 50}, {"b", 40}, {"c", 30}, {"d", 20}, {"e", 10}}) {
    CommitModule(*store, name, seconds_ago);
  }
  std::ofstream(store->ArtifactPath(KernelId{"f"})) << std::string(1000, 'x');  // compiling
  ASSERT_TRUE(store->Find(KernelId{"a"}).ok());  // used now: the newest
  const uint64_t module_bytes = store->BytesOf(KernelId{"a"});
  EXPECT_GT(module_bytes, 1000u);
  const uint64_t total = 5 * module_bytes + 1000;

  ModuleStore::Swept untouched = store->Sweep(total, 0);
  EXPECT_TRUE(untouched.removed.empty()) << "nothing goes while the store fits";
  EXPECT_EQ(untouched.bytes_left, total);

  ModuleStore::Swept swept = store->Sweep(total - 1, total - 2 * module_bytes);
  std::vector<std::string> removed;
  for (const KernelId& id : swept.removed) removed.push_back(id.hex);
  EXPECT_THAT(removed, ::testing::ElementsAre("b", "c"));
  EXPECT_EQ(swept.bytes_left, total - 2 * module_bytes);
  for (const char* gone : {"b", "c"}) {
    EXPECT_EQ(store->Find(KernelId{gone}).status().code(), absl::StatusCode::kNotFound) << gone;
    EXPECT_EQ(store->BytesOf(KernelId{gone}), 0u) << gone;
  }
  for (const char* kept : {"a", "d", "e"}) EXPECT_TRUE(store->Find(KernelId{kept}).ok()) << kept;
  EXPECT_TRUE(std::filesystem::exists(store->ArtifactPath(KernelId{"f"})))
      << "an artifact not committed yet was removed";
}

TEST(ModuleStoreTest, AnUnwritableDirectoryIsRefused) {
  EXPECT_EQ(ModuleStore::Open("/proc/gpucmd-modules", ".so").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpucmd
