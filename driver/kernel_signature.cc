#include "driver/kernel_signature.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace gpucmd {

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

std::string SerializeSignature(const std::vector<KernelParam>& params) {
  std::string out;
  for (const KernelParam& param : params) {
    absl::StrAppend(&out, static_cast<int>(param.kind), " ", static_cast<int>(param.scalar), " ",
                    param.read_only ? 1 : 0, " ", absl::StrReplaceAll(param.declared_type, {{"\n", " "}}), "\n");
  }
  return out;
}

absl::StatusOr<std::vector<KernelParam>> DeserializeSignature(absl::string_view text) {
  std::vector<KernelParam> params;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(' ', 3));
    int kind = 0, scalar = 0;
    if (fields.size() != 4 || !absl::SimpleAtoi(fields[0], &kind) ||
        !absl::SimpleAtoi(fields[1], &scalar) || (fields[2] != "0" && fields[2] != "1")) {
      return absl::DataLossError(absl::StrCat("corrupt signature line \"", line, "\""));
    }
    params.push_back(KernelParam{static_cast<ParamKind>(kind), static_cast<ScalarKind>(scalar),
                                 std::string(fields[3]), fields[2] == "1"});
  }
  return params;
}

std::string SerializeParsedKernel(const ParsedKernel& kernel) {
  std::string out = absl::StrCat("threads_meet ", kernel.threads_meet ? 1 : 0, "\n");
  for (const DynamicSharedArray& array : kernel.dynamic_shared) {
    absl::StrAppend(&out, "dynamic_shared ", array.begin, " ", array.end, " ",
                    array.in_function ? 1 : 0, " ", array.name, " ", array.element_type, "\n");
  }
  for (const UnsupportedUse& use : kernel.unsupported) {
    absl::StrAppend(&out, "unsupported ", use.line, " ", use.feature, "\n");
  }
  for (absl::string_view line : absl::StrSplit(SerializeSignature(kernel.params), '\n',
                                               absl::SkipEmpty())) {
    absl::StrAppend(&out, "param ", line, "\n");
  }
  return out;
}

absl::StatusOr<ParsedKernel> DeserializeParsedKernel(absl::string_view text) {
  ParsedKernel kernel;
  std::string params;
  auto corrupt = [](absl::string_view line) {
    return absl::DataLossError(absl::StrCat("corrupt front-end line \"", line, "\""));
  };
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(' ', 5));
    const absl::string_view what = fields[0];
    if (what == "threads_meet" && fields.size() == 2) {
      kernel.threads_meet = fields[1] == "1";
    } else if (what == "dynamic_shared" && fields.size() == 6) {
      DynamicSharedArray& array = kernel.dynamic_shared.emplace_back();
      if (!absl::SimpleAtoi(fields[1], &array.begin) || !absl::SimpleAtoi(fields[2], &array.end) ||
          array.end < array.begin || (fields[3] != "0" && fields[3] != "1")) {
        return corrupt(line);
      }
      array.in_function = fields[3] == "1";
      array.name = std::string(fields[4]);
      array.element_type = std::string(fields[5]);
    } else if (what == "unsupported" && fields.size() >= 3) {
      UnsupportedUse& use = kernel.unsupported.emplace_back();
      if (!absl::SimpleAtoi(fields[1], &use.line)) return corrupt(line);
      use.feature = std::string(line.substr(fields[0].size() + fields[1].size() + 2));
    } else if (what == "param" && fields.size() >= 2) {
      absl::StrAppend(&params, line.substr(what.size() + 1), "\n");
    } else {
      return corrupt(line);
    }
  }
  ASSIGN_OR_RETURN(kernel.params, DeserializeSignature(params));
  return kernel;
}

}  // namespace gpucmd
