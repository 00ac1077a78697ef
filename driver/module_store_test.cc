#include "driver/module_store.h"

#include <cstdlib>
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

TEST(ModuleStoreTest, AnUnwritableDirectoryIsRefused) {
  EXPECT_EQ(ModuleStore::Open("/proc/gpucmd-modules", ".so").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpucmd
