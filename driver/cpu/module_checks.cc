#include "driver/cpu/module_checks.h"

#include <elf.h>

#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpucmd {
namespace {

// Section names whose contents run when a module is loaded or unloaded.
constexpr const char* kLoadTimeSections[] = {".init_array", ".fini_array", ".preinit_array",
                                             ".ctors",      ".dtors",      ".init",
                                             ".fini"};

}  // namespace

absl::Status CheckKernelAssembly(absl::string_view assembly) {
  const std::vector<absl::string_view> lines = absl::StrSplit(assembly, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (line == "#APP") {
      // The compiler marks where the assembly came from: `# LINE "FILE" 1`.
      std::string where;
      if (i + 1 < lines.size()) {
        absl::string_view marker = absl::StripAsciiWhitespace(lines[i + 1]);
        std::vector<absl::string_view> parts = absl::StrSplit(marker, ' ');
        if (parts.size() >= 3 && parts[0] == "#" && parts[2].size() >= 2 &&
            parts[2].front() == '"' && parts[2].back() == '"') {
          where = absl::StrCat(" at ", parts[2].substr(1, parts[2].size() - 2), ":", parts[1]);
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "the CPU driver does not support inline assembly (asm, __asm__, inline PTX), in any "
          "spelling: the compiled kernel holds some", where));
    }
    if (absl::StartsWith(line, ".type") && absl::EndsWith(line, "@gnu_indirect_function")) {
      return absl::InvalidArgumentError(
          "the CPU driver does not support indirect functions (ifunc): their resolvers run "
          "when the module loads");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNoLoadTimeCode(absl::string_view module) {
  auto malformed = [] { return absl::InvalidArgumentError("the kernel module is not ELF64"); };
  Elf64_Ehdr header;
  if (module.size() < sizeof(header)) return malformed();
  std::memcpy(&header, module.data(), sizeof(header));
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shstrndx >= header.e_shnum ||
      header.e_shoff > module.size() ||
      (module.size() - header.e_shoff) / sizeof(Elf64_Shdr) < header.e_shnum) {
    return malformed();
  }
  auto section = [&](size_t index) {
    Elf64_Shdr entry;
    std::memcpy(&entry, module.data() + header.e_shoff + index * sizeof(Elf64_Shdr),
                sizeof(entry));
    return entry;
  };
  const Elf64_Shdr names = section(header.e_shstrndx);
  if (names.sh_offset > module.size() || module.size() - names.sh_offset < names.sh_size) {
    return malformed();
  }
  absl::string_view name_table = module.substr(names.sh_offset, names.sh_size);
  for (size_t i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr entry = section(i);
    if (entry.sh_name >= name_table.size() || entry.sh_size == 0) continue;
    absl::string_view name = name_table.substr(entry.sh_name);
    name = name.substr(0, name.find('\0'));
    for (const char* load_time : kLoadTimeSections) {
      if (name != load_time) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "the CPU driver does not run code when a kernel module loads or unloads, and this "
          "one has some (its ", name, " section): a constructor or destructor, or a global "
          "object with a dynamic initializer or a destructor; initialise such state inside "
          "the kernel instead"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpucmd
