#include "driver/kernel_signature.h"

#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace gpucmd {
namespace {

// Removes // and /* */ comments so they cannot hide or fake a declaration.
std::string StripComments(absl::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source.substr(i, 2) == "//") {
      while (i < source.size() && source[i] != '\n') ++i;
      out.push_back('\n');
    } else if (source.substr(i, 2) == "/*") {
      size_t end = source.find("*/", i + 2);
      i = end == absl::string_view::npos ? source.size() : end + 1;
      out.push_back(' ');
    } else {
      out.push_back(source[i]);
    }
  }
  return out;
}

absl::StatusOr<ScalarKind> ScalarFor(absl::string_view type) {
  static const std::pair<absl::string_view, ScalarKind> kTypes[] = {
      {"int", ScalarKind::kI32},
      {"signed int", ScalarKind::kI32},
      {"int32_t", ScalarKind::kI32},
      {"unsigned", ScalarKind::kU32},
      {"unsigned int", ScalarKind::kU32},
      {"uint32_t", ScalarKind::kU32},
      {"long long", ScalarKind::kI64},
      {"long long int", ScalarKind::kI64},
      {"long", ScalarKind::kI64},
      {"int64_t", ScalarKind::kI64},
      {"ptrdiff_t", ScalarKind::kI64},
      {"unsigned long long", ScalarKind::kU64},
      {"unsigned long", ScalarKind::kU64},
      {"uint64_t", ScalarKind::kU64},
      {"size_t", ScalarKind::kU64},
      {"float", ScalarKind::kF32},
      {"double", ScalarKind::kF64},
  };
  for (const auto& [name, kind] : kTypes) {
    if (type == name) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported parameter type \"", type, "\""));
}

}  // namespace

size_t ScalarSize(ScalarKind kind) {
  switch (kind) {
    case ScalarKind::kI32:
    case ScalarKind::kU32:
    case ScalarKind::kF32:
      return 4;
    case ScalarKind::kI64:
    case ScalarKind::kU64:
    case ScalarKind::kF64:
      return 8;
    case ScalarKind::kNone:
      break;
  }
  return 0;
}

absl::StatusOr<std::vector<KernelParam>> ParseKernelSignature(absl::string_view source,
                                                              absl::string_view entry) {
  std::string code = StripComments(source);
  std::regex declaration(absl::StrCat(R"(extern\s+"C"\s+__global__\s+void\s+)", entry,
                                      R"(\s*\(([^)]*)\))"));
  std::smatch match;
  if (!std::regex_search(code, match, declaration)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "entry point \"", entry, "\" not found: declare it as extern \"C\" __global__ void ",
        entry, "(...)"));
  }
  std::vector<KernelParam> params;
  std::string list = std::string(absl::StripAsciiWhitespace(match[1].str()));
  if (list.empty() || list == "void") return params;
  for (absl::string_view raw : absl::StrSplit(list, ',')) {
    std::string param = std::string(absl::StripAsciiWhitespace(raw));
    // Drop the parameter's name (the last identifier) and qualifiers.
    std::smatch named;
    std::string type = param;
    if (std::regex_match(param, named, std::regex(R"((.*[^A-Za-z0-9_])([A-Za-z_]\w*)\s*)"))) {
      type = named[1].str();
    }
    for (const char* qualifier : {"__restrict__", "__restrict", "const", "volatile",
                                  "__grid_constant__"}) {
      type = std::regex_replace(type, std::regex(absl::StrCat(R"(\b)", qualifier, R"(\b)")), " ");
    }
    type = std::regex_replace(type, std::regex(R"(\s+)"), " ");
    type = std::string(absl::StripAsciiWhitespace(type));
    KernelParam kernel_param;
    kernel_param.declared_type = std::string(absl::StripAsciiWhitespace(param));
    if (!type.empty() && type.back() == '*') {
      kernel_param.kind = ParamKind::kBuffer;
    } else if (type == "CUtensorMap") {
      kernel_param.kind = ParamKind::kTensorMap;
    } else {
      absl::StatusOr<ScalarKind> scalar = ScalarFor(type);
      if (!scalar.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("parameter ", params.size(), " of ",
                                                       entry, ": ", scalar.status().message()));
      }
      kernel_param.kind = ParamKind::kScalar;
      kernel_param.scalar = *scalar;
    }
    params.push_back(std::move(kernel_param));
  }
  return params;
}

std::string SerializeSignature(const std::vector<KernelParam>& params) {
  std::string out;
  for (const KernelParam& param : params) {
    absl::StrAppend(&out, static_cast<int>(param.kind), " ", static_cast<int>(param.scalar), " ",
                    absl::StrReplaceAll(param.declared_type, {{"\n", " "}}), "\n");
  }
  return out;
}

absl::StatusOr<std::vector<KernelParam>> DeserializeSignature(absl::string_view text) {
  std::vector<KernelParam> params;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    int kind = 0, scalar = 0;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &kind) ||
        !absl::SimpleAtoi(fields[1], &scalar)) {
      return absl::DataLossError(absl::StrCat("corrupt signature line \"", line, "\""));
    }
    params.push_back(KernelParam{static_cast<ParamKind>(kind), static_cast<ScalarKind>(scalar),
                                 std::string(fields[2])});
  }
  return params;
}

}  // namespace gpucmd
