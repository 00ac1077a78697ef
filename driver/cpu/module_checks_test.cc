#include "driver/cpu/module_checks.h"

#include <elf.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

// A minimal ELF64 file whose section headers name `sections` (name, size); their
// contents are not there, only the headers and the name table.
std::string ElfWithSections(const std::vector<std::pair<std::string, uint64_t>>& sections) {
  std::string names(1, '\0');
  std::vector<Elf64_Shdr> headers(1);  // the null section
  for (const auto& [name, size] : sections) {
    Elf64_Shdr header{};
    header.sh_name = static_cast<uint32_t>(names.size());
    header.sh_type = SHT_PROGBITS;
    header.sh_size = size;
    headers.push_back(header);
    names += name + '\0';
  }
  Elf64_Shdr name_table{};
  name_table.sh_name = static_cast<uint32_t>(names.size());
  names += std::string(".shstrtab") + '\0';
  name_table.sh_type = SHT_STRTAB;
  name_table.sh_offset = sizeof(Elf64_Ehdr);
  name_table.sh_size = names.size();
  headers.push_back(name_table);

  Elf64_Ehdr header{};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_shoff = sizeof(Elf64_Ehdr) + names.size();
  header.e_shentsize = sizeof(Elf64_Shdr);
  header.e_shnum = static_cast<uint16_t>(headers.size());
  header.e_shstrndx = static_cast<uint16_t>(headers.size() - 1);
  std::string file(reinterpret_cast<const char*>(&header), sizeof(header));
  file += names;
  file.append(reinterpret_cast<const char*>(headers.data()), headers.size() * sizeof(Elf64_Shdr));
  return file;
}

TEST(ModuleChecksTest, InlineAssemblyAndIndirectFunctionsAreRefused) {
  EXPECT_TRUE(CheckKernelAssembly("f:\n\tmovl %edi, %eax\n\tret\n").ok());
  EXPECT_TRUE(CheckKernelAssembly("\t.string \"#APP\"\n").ok()) << "data is not assembly";
  absl::Status inline_asm = CheckKernelAssembly("f:\n#APP\n# 3 \"kernel.cu\" 1\n\tnop\n#NO_APP\n");
  EXPECT_EQ(inline_asm.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(inline_asm.message()), HasSubstr("inline assembly"));
  absl::Status resolver = CheckKernelAssembly("\t.type\tg, @gnu_indirect_function\n");
  EXPECT_EQ(resolver.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(resolver.message()), HasSubstr("ifunc"));
}

TEST(ModuleChecksTest, ModulesWithLoadTimeCodeAreRefused) {
  EXPECT_TRUE(CheckNoLoadTimeCode(ElfWithSections({{".text", 64}, {".data", 8}})).ok());
  EXPECT_TRUE(CheckNoLoadTimeCode(ElfWithSections({{".init_array", 0}})).ok()) << "empty";
  for (const char* section : {".init_array", ".fini_array", ".preinit_array", ".ctors", ".init"}) {
    absl::Status refused = CheckNoLoadTimeCode(ElfWithSections({{".text", 64}, {section, 8}}));
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << section;
    EXPECT_THAT(std::string(refused.message()), HasSubstr(section));
  }
}

TEST(ModuleChecksTest, WhatIsNotElfIsRefused) {
  EXPECT_EQ(CheckNoLoadTimeCode("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckNoLoadTimeCode("not an ELF file at all, but long enough to hold a header....")
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::string truncated = ElfWithSections({{".text", 64}});
  truncated.resize(truncated.size() - 10);
  EXPECT_EQ(CheckNoLoadTimeCode(truncated).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpucmd
