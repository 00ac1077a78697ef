#include "driver/front_end/kernel_parser.h"

#include <clang-c/Index.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "driver/compile_options.h"
#include "driver/cpu/cpu_headers.h"
#include "driver/cpu/cpu_prelude.h"

namespace gpucmd {
namespace {

// Where the parse finds the client's source, the prelude and the headers: files that
// exist only in the parser's memory.
constexpr char kSourcePath[] = "/gpucmd-front-end/kernel.cu";
constexpr char kPreludePath[] = "/gpucmd-front-end/gpucmd_prelude.h";
constexpr char kIncludeDirectory[] = "/gpucmd-front-end/include";

// Names of the functions at which a block's threads meet, besides everything in
// namespaces cooperative_groups and cub (InCollectives).
constexpr absl::string_view kMeetingPrefixes[] = {
    "__syncthreads", "__syncwarp", "__shfl", "__ballot_sync", "__any_sync",
    "__all_sync",    "__activemask", "__match_", "__reduce_"};

constexpr absl::string_view kUnsupportedMark = "gpucmd-unsupported:";

std::string Take(CXString text) {
  const char* chars = clang_getCString(text);
  std::string out = chars == nullptr ? "" : chars;
  clang_disposeString(text);
  return out;
}

struct Place {
  bool in_source = false;  // in the client's kernel.cu, not the prelude or a header
  unsigned line = 0;
  unsigned column = 0;
  unsigned offset = 0;
};

// Where `location` lands in the file once macros are expanded.
Place PlaceOf(CXSourceLocation location) {
  Place place;
  CXFile file = nullptr;
  clang_getExpansionLocation(location, &file, &place.line, &place.column, &place.offset);
  place.in_source = file != nullptr && Take(clang_getFileName(file)) == kSourcePath;
  return place;
}

// Calls `visit` on each child of `parent`; it returns whether to descend into one.
void VisitChildren(CXCursor parent, const std::function<bool(CXCursor)>& visit) {
  clang_visitChildren(
      parent,
      [](CXCursor child, CXCursor, CXClientData data) {
        const auto& visit = *static_cast<const std::function<bool(CXCursor)>*>(data);
        return visit(child) ? CXChildVisit_Recurse : CXChildVisit_Continue;
      },
      const_cast<std::function<bool(CXCursor)>*>(&visit));
}

// The annotations of a function template or an unexposed declaration (a variable
// template and its specializations), whose attributes libclang's cursors do not show:
// read from its declaration as printed without its body, where each is
// `__attribute__((annotate("NAME")))` (a string in it would print its quotes escaped).
std::vector<std::string> PrintedAnnotationsOf(CXCursor declaration) {
  CXPrintingPolicy policy = clang_getCursorPrintingPolicy(declaration);
  clang_PrintingPolicy_setProperty(policy, CXPrintingPolicy_TerseOutput, 1);
  const std::string printed = Take(clang_getCursorPrettyPrinted(declaration, policy));
  clang_PrintingPolicy_dispose(policy);
  constexpr char kOpen[] = "annotate(\"";
  std::vector<std::string> annotations;
  for (size_t at = printed.find(kOpen); at != std::string::npos; at = printed.find(kOpen, at)) {
    at += sizeof(kOpen) - 1;
    const size_t end = printed.find('"', at);
    if (end == std::string::npos) break;
    annotations.push_back(printed.substr(at, end - at));
  }
  return annotations;
}

std::vector<std::string> AnnotationsOf(CXCursor cursor) {
  const CXCursorKind kind = clang_getCursorKind(cursor);
  if (kind == CXCursor_FunctionTemplate || kind == CXCursor_UnexposedDecl) {
    return PrintedAnnotationsOf(cursor);
  }
  std::vector<std::string> annotations;
  if (!clang_Cursor_hasAttrs(cursor)) return annotations;
  VisitChildren(cursor, [&](CXCursor child) {
    if (clang_getCursorKind(child) == CXCursor_AnnotateAttr) {
      annotations.push_back(Take(clang_getCursorSpelling(child)));
    }
    return false;
  });
  return annotations;
}

bool HasAnnotation(CXCursor cursor, absl::string_view annotation) {
  for (const std::string& found : AnnotationsOf(cursor)) {
    if (found == annotation) return true;
  }
  return false;
}

// The feature an unsupported declaration stands for; nullopt for the others.
std::optional<std::string> UnsupportedFeatureOf(CXCursor declaration) {
  for (const std::string& annotation : AnnotationsOf(declaration)) {
    if (absl::StartsWith(annotation, kUnsupportedMark)) {
      return annotation.substr(kUnsupportedMark.size());
    }
  }
  return std::nullopt;
}

bool IsFunction(CXCursorKind kind) {
  return kind == CXCursor_FunctionDecl || kind == CXCursor_CXXMethod ||
         kind == CXCursor_FunctionTemplate || kind == CXCursor_Constructor ||
         kind == CXCursor_ConversionFunction;
}

// Whether `declaration` is in a library of collectives whose calls the CPU driver takes as
// meetings of the block's threads, whatever they do (<cooperative_groups.h>, CUB's headers:
// driver/cub_headers.h): their barriers are in headers, which the search of the source's
// calls does not enter.
bool InCollectives(CXCursor declaration) {
  for (CXCursor scope = clang_getCursorSemanticParent(declaration);
       !clang_Cursor_isNull(scope) && clang_getCursorKind(scope) != CXCursor_TranslationUnit;
       scope = clang_getCursorSemanticParent(scope)) {
    if (clang_getCursorKind(scope) != CXCursor_Namespace) continue;
    const std::string name = Take(clang_getCursorSpelling(scope));
    if (name == "cooperative_groups" || name == "cub") return true;
  }
  return false;
}

// Whether calling `function` makes the block's threads meet.
bool Meets(CXCursor function) {
  if (!IsFunction(clang_getCursorKind(function))) return false;
  const std::string name = Take(clang_getCursorSpelling(function));
  for (absl::string_view prefix : kMeetingPrefixes) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return InCollectives(function);
}

// Whether `declaration`'s tokens end in `= delete`.
bool Deleted(CXTranslationUnit unit, CXCursor declaration) {
  CXToken* tokens = nullptr;
  unsigned count = 0;
  clang_tokenize(unit, clang_getCursorExtent(declaration), &tokens, &count);
  const bool deleted = count >= 2 && Take(clang_getTokenSpelling(unit, tokens[count - 2])) == "=" &&
                       Take(clang_getTokenSpelling(unit, tokens[count - 1])) == "delete";
  clang_disposeTokens(unit, tokens, count);
  return deleted;
}

constexpr absl::string_view kHostCodeRefused =
    ". NVRTC refuses host code in a kernel's source, and device code can use none";

// The kind of `declaration`'s scope, past `extern "C" { ... }` (which libclang shows as
// an unexposed declaration).
CXCursorKind ScopeOf(CXCursor declaration) {
  CXCursor parent = clang_getCursorSemanticParent(declaration);
  while (clang_getCursorKind(parent) == CXCursor_LinkageSpec ||
         clang_getCursorKind(parent) == CXCursor_UnexposedDecl) {
    parent = clang_getCursorSemanticParent(parent);
  }
  return clang_getCursorKind(parent);
}

bool IsNamespaceScope(CXCursorKind scope) {
  return scope == CXCursor_TranslationUnit || scope == CXCursor_Namespace;
}

bool IsClassScope(CXCursorKind scope) {
  return scope == CXCursor_StructDecl || scope == CXCursor_ClassDecl ||
         scope == CXCursor_UnionDecl || scope == CXCursor_ClassTemplate ||
         scope == CXCursor_ClassTemplatePartialSpecialization;
}

// Whether `variable`'s type, or its arrays' elements' type, is const.
bool ConstVariable(CXCursor variable) {
  CXType type = clang_getCursorType(variable);
  while (clang_getArrayElementType(type).kind != CXType_Invalid) {
    type = clang_getArrayElementType(type);
  }
  return clang_isConstQualifiedType(type);
}

// What to say of a variable at namespace or class scope that NVRTC takes for a host
// variable: one at namespace scope in no memory space and not const; a class's static
// data member that is not const, whatever its annotations. Nullopt for the others.
// `template_use`: the variable is a variable template's specialization that device
// code uses.
std::optional<std::string> HostVariable(CXCursor variable, CXCursorKind scope, bool template_use) {
  if (ConstVariable(variable)) return std::nullopt;
  const std::string name =
      absl::StrCat(template_use ? "template " : "", Take(clang_getCursorSpelling(variable)),
                   template_use ? ", used here," : "");
  if (IsClassScope(scope)) {
    return absl::StrCat("static data member ", name,
                        " is host code: NVRTC takes a class's static data member that is not "
                        "const for a host variable, whatever its annotations: make it const or "
                        "constexpr, or a __device__ variable at namespace scope",
                        kHostCodeRefused);
  }
  if (!IsNamespaceScope(scope)) return std::nullopt;
  for (absl::string_view space : {"__device__", "__constant__", "__shared__", "__managed__"}) {
    if (HasAnnotation(variable, space)) return std::nullopt;
  }
  return absl::StrCat("variable ", name,
                      " is host code: declare it __device__ or __constant__, or const",
                      kHostCodeRefused);
}

// Whether a declaration of the client's source is code NVRTC refuses, as host code or
// as thread-local storage (Note [Host code in a kernel's source]): what to say of it when
// it is, nullopt otherwise.
std::optional<std::string> HostDeclaration(CXTranslationUnit unit, CXCursor declaration) {
  const CXCursorKind kind = clang_getCursorKind(declaration);
  const bool function = IsFunction(kind) || kind == CXCursor_Destructor;
  if (!function && kind != CXCursor_VarDecl && kind != CXCursor_UnexposedDecl) {
    return std::nullopt;
  }
  const std::string name = Take(clang_getCursorSpelling(declaration));
  if (function) {
    // A redeclaration of the runtime's own (puts, say) is the runtime's: the attributes it
    // adds after the prelude's definition are dropped. A deduction guide is no function.
    if (!PlaceOf(clang_getCursorLocation(clang_getCanonicalCursor(declaration))).in_source ||
        absl::StartsWith(name, "<deduction guide for ")) {
      return std::nullopt;
    }
    const bool device =
        HasAnnotation(declaration, "__device__") || HasAnnotation(declaration, "__global__");
    const bool member = kind != CXCursor_FunctionDecl && kind != CXCursor_FunctionTemplate;
    if (device || clang_CXXMethod_isDefaulted(declaration) ||
        (member && Deleted(unit, declaration))) {
      return std::nullopt;
    }
    return absl::StrCat("function ", name,
                        " is host code: declare it __device__ (or __host__ __device__)",
                        kHostCodeRefused);
  }
  const CXCursorKind scope = ScopeOf(declaration);
  if (kind == CXCursor_UnexposedDecl && absl::StartsWith(name, "[") && IsNamespaceScope(scope)) {
    return absl::StrCat("structured binding ", name,
                        " is host code: NVRTC refuses structured bindings outside functions");
  }
  if (kind != CXCursor_VarDecl) return std::nullopt;
  if (clang_getCursorTLSKind(declaration) != CXTLS_None) {
    return absl::StrCat("variable ", name,
                        " is thread_local: device code has no thread-local storage, and NVRTC "
                        "refuses the specifier");
  }
  if (IsClassScope(scope) && clang_Cursor_getStorageClass(declaration) != CX_SC_Static) {
    return std::nullopt;
  }
  return HostVariable(declaration, scope, /*template_use=*/false);
}

// Whether `reference` names a variable template's specialization that is a host
// variable, which NVRTC refuses where device code uses it (an unused one passes): what to
// say of it when it does, nullopt otherwise. libclang shows such a specialization as an
// unexposed declaration with a type.
std::optional<std::string> HostVariableTemplateUse(CXCursor reference) {
  const CXCursorKind kind = clang_getCursorKind(reference);
  if (kind != CXCursor_DeclRefExpr && kind != CXCursor_MemberRefExpr) return std::nullopt;
  const CXCursor variable = clang_getCursorReferenced(reference);
  if (clang_getCursorKind(variable) != CXCursor_UnexposedDecl ||
      clang_getCursorType(variable).kind == CXType_Invalid) {
    return std::nullopt;
  }
  return HostVariable(variable, ScopeOf(variable), /*template_use=*/true);
}

absl::StatusOr<ScalarKind> ScalarKindOf(CXType canonical) {
  switch (canonical.kind) {
    case CXType_Int:
      return ScalarKind::kI32;
    case CXType_UInt:
      return ScalarKind::kU32;
    case CXType_Long:
    case CXType_LongLong:
      return ScalarKind::kI64;
    case CXType_ULong:
    case CXType_ULongLong:
      return ScalarKind::kU64;
    case CXType_Float:
      return ScalarKind::kF32;
    case CXType_Double:
      return ScalarKind::kF64;
    default:
      return absl::InvalidArgumentError("not a supported parameter type");
  }
}

class Parse {
 public:
  Parse(absl::string_view source, absl::string_view entry) : source_(source), entry_(entry) {}
  ~Parse() {
    if (unit_ != nullptr) clang_disposeTranslationUnit(unit_);
    if (index_ != nullptr) clang_disposeIndex(index_);
  }

  absl::Status Run(const std::vector<std::string>& options, const std::string& resource_directory);
  absl::StatusOr<ParsedKernel> Read();

 private:
  // Reads `cursor`; `function` is the USR of the function whose body holds it ("" at
  // file scope). Returns whether to descend into it.
  bool Visit(CXCursor cursor, const std::string& function);
  void ReadReference(CXCursor cursor, const Place& place, const std::string& function);
  void ReadDynamicShared(CXCursor variable, const Place& place, bool in_function);
  // Whether the entry point reaches a function at which threads meet.
  bool EntryMeets(const std::string& entry_function) const;
  void FindKernelLaunches();
  absl::StatusOr<CXCursor> FindEntryPoint() const;
  absl::StatusOr<std::vector<KernelParam>> ReadParams(CXCursor entry) const;
  // The parser's first errors, one per line, or "" when there are none.
  std::string Errors() const;
  absl::Status Invalid(unsigned line, absl::string_view message) const;

  const std::string source_;
  const std::string entry_;
  CXIndex index_ = nullptr;
  CXTranslationUnit unit_ = nullptr;
  ParsedKernel parsed_;
  std::vector<CXCursor> entry_declarations_;
  // Of each function defined in the source (by USR): whether it meets itself, and the
  // functions of the source it refers to.
  absl::flat_hash_set<std::string> meeting_functions_;
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> callees_;
  absl::Status malformed_;  // the first declaration the CPU driver cannot transform
  absl::Status host_code_;  // the first declaration that is host code
};

absl::Status Parse::Run(const std::vector<std::string>& options,
                        const std::string& resource_directory) {
  // The client's -D and -U shape what is parsed; its other options mean nothing here.
  ASSIGN_OR_RETURN(std::vector<std::string> flags, TranslateCompileOptions(options, {}));
  std::vector<std::string> arguments = {"-x", "c++", "-std=c++17", "-w",
                                        "-DGPUCMD_KERNEL_FRONT_END", "-include", kPreludePath,
                                        absl::StrCat("-I", kIncludeDirectory)};
  for (const std::string& flag : flags) {
    if (absl::StartsWith(flag, "-D") || absl::StartsWith(flag, "-U")) arguments.push_back(flag);
  }
  if (!resource_directory.empty()) {
    arguments.insert(arguments.end(), {"-resource-dir", resource_directory});
  }
  std::vector<const char*> argv;
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());

  const std::string prelude(CpuKernelPrelude());
  std::vector<std::string> header_paths;
  for (const auto& [name, contents] : CpuKernelHeaders()) {
    header_paths.push_back(absl::StrCat(kIncludeDirectory, "/", name));
  }
  std::vector<CXUnsavedFile> files = {
      {kSourcePath, source_.data(), static_cast<unsigned long>(source_.size())},
      {kPreludePath, prelude.data(), static_cast<unsigned long>(prelude.size())}};
  for (size_t i = 0; i < header_paths.size(); ++i) {
    const std::string& contents = CpuKernelHeaders()[i].second;
    files.push_back({header_paths[i].c_str(), contents.data(),
                     static_cast<unsigned long>(contents.size())});
  }
  index_ = clang_createIndex(/*excludeDeclarationsFromPCH=*/0, /*displayDiagnostics=*/0);
  const CXErrorCode parsed = clang_parseTranslationUnit2(
      index_, kSourcePath, argv.data(), static_cast<int>(argv.size()), files.data(),
      static_cast<unsigned>(files.size()), CXTranslationUnit_KeepGoing, &unit_);
  if (parsed != CXError_Success || unit_ == nullptr) {
    return absl::InternalError(absl::StrCat("the kernel parser failed (libclang error ",
                                            static_cast<int>(parsed), ")"));
  }
  return absl::OkStatus();
}

std::string Parse::Errors() const {
  std::vector<std::string> errors;
  const unsigned count = clang_getNumDiagnostics(unit_);
  for (unsigned i = 0; i < count && errors.size() < 10; ++i) {
    CXDiagnostic diagnostic = clang_getDiagnostic(unit_, i);
    if (clang_getDiagnosticSeverity(diagnostic) >= CXDiagnostic_Error) {
      const Place place = PlaceOf(clang_getDiagnosticLocation(diagnostic));
      errors.push_back(absl::StrCat(place.in_source ? "kernel.cu" : "(header)", ":", place.line,
                                    ":", place.column, ": error: ",
                                    Take(clang_getDiagnosticSpelling(diagnostic))));
    }
    clang_disposeDiagnostic(diagnostic);
  }
  return absl::StrJoin(errors, "\n");
}

absl::Status Parse::Invalid(unsigned line, absl::string_view message) const {
  std::string text = absl::StrCat("kernel.cu:", line, ": ", message);
  if (std::string errors = Errors(); !errors.empty()) absl::StrAppend(&text, "\n", errors);
  return absl::InvalidArgumentError(text);
}

void Parse::ReadDynamicShared(CXCursor variable, const Place& place, bool in_function) {
  const CXType type = clang_getCursorType(variable);
  const std::string name = Take(clang_getCursorSpelling(variable));
  if (type.kind != CXType_IncompleteArray) {
    if (malformed_.ok()) {
      malformed_ = Invalid(place.line, absl::StrCat("extern __shared__ ", name,
                                                    " must be an array of unknown size: "
                                                    "extern __shared__ T ",
                                                    name, "[];"));
    }
    return;
  }
  const CXSourceRange extent = clang_getCursorExtent(variable);
  const Place begin = PlaceOf(clang_getRangeStart(extent));
  const Place end = PlaceOf(clang_getRangeEnd(extent));
  const bool overlaps = !parsed_.dynamic_shared.empty() &&
                        parsed_.dynamic_shared.back().end > begin.offset;
  if (!begin.in_source || !end.in_source || end.offset <= begin.offset || overlaps) {
    if (malformed_.ok()) {
      malformed_ = Invalid(place.line, absl::StrCat("declare extern __shared__ ", name,
                                                    " in a declaration of its own, "
                                                    "outside macros"));
    }
    return;
  }
  parsed_.dynamic_shared.push_back(
      {.begin = begin.offset,
       .end = end.offset,
       .in_function = in_function,
       .name = name,
       .element_type = Take(clang_getTypeSpelling(clang_getArrayElementType(type)))});
}

// The key of a function for the call graph: a template's, for its specializations.
std::string FunctionKey(CXCursor function) {
  const CXCursor specialized = clang_getSpecializedCursorTemplate(function);
  return Take(clang_getCursorUSR(clang_Cursor_isNull(specialized) ? function : specialized));
}

bool Parse::Visit(CXCursor cursor, const std::string& function) {
  const Place place = PlaceOf(clang_getCursorLocation(cursor));
  if (!place.in_source) return false;
  const CXCursorKind kind = clang_getCursorKind(cursor);
  if (host_code_.ok()) {
    std::optional<std::string> host = HostDeclaration(unit_, cursor);
    if (!host.has_value()) host = HostVariableTemplateUse(cursor);
    if (host.has_value()) host_code_ = Invalid(place.line, *host);
  }
  if (kind == CXCursor_FunctionDecl && Take(clang_getCursorSpelling(cursor)) == entry_) {
    entry_declarations_.push_back(cursor);
  }
  if (function.empty() && IsFunction(kind) && clang_isCursorDefinition(cursor)) {
    // A body of its own: what it refers to is recorded under its key.
    const std::string key = FunctionKey(cursor);
    callees_[key];
    VisitChildren(cursor, [&](CXCursor child) { return Visit(child, key); });
    return false;
  }
  if (kind == CXCursor_GCCAsmStmt) {
    parsed_.unsupported.push_back({"inline PTX (asm)", static_cast<int>(place.line)});
  } else if (kind == CXCursor_VarDecl) {
    if (HasAnnotation(cursor, "__managed__")) {
      parsed_.unsupported.push_back(
          {"managed memory (__managed__)", static_cast<int>(place.line)});
    }
    if (HasAnnotation(cursor, "__shared__") &&
        clang_Cursor_getStorageClass(cursor) == CX_SC_Extern) {
      ReadDynamicShared(cursor, place, /*in_function=*/!function.empty());
    }
  }
  ReadReference(cursor, place, function);
  return true;
}

void Parse::ReadReference(CXCursor cursor, const Place& place, const std::string& function) {
  // A name a template's instantiation resolves refers to each of its candidates (a
  // shuffle of the template's type, say); any other cursor to what it names.
  std::vector<CXCursor> declarations;
  if (clang_getCursorKind(cursor) == CXCursor_OverloadedDeclRef) {
    for (unsigned i = 0; i < clang_getNumOverloadedDecls(cursor); ++i) {
      declarations.push_back(clang_getOverloadedDecl(cursor, i));
    }
  } else {
    const CXCursor referenced = clang_getCursorReferenced(cursor);
    if (clang_Cursor_isNull(referenced) || clang_equalCursors(referenced, cursor)) return;
    declarations.push_back(referenced);
  }
  for (CXCursor declaration : declarations) {
    if (std::optional<std::string> feature = UnsupportedFeatureOf(declaration)) {
      parsed_.unsupported.push_back({*feature, static_cast<int>(place.line)});
    }
    if (function.empty() || !IsFunction(clang_getCursorKind(declaration))) continue;
    if (Meets(declaration)) {
      meeting_functions_.insert(function);
    } else if (PlaceOf(clang_getCursorLocation(declaration)).in_source) {
      callees_[function].insert(FunctionKey(declaration));
    }
  }
}

bool Parse::EntryMeets(const std::string& entry_function) const {
  std::vector<std::string> pending = {entry_function};
  absl::flat_hash_set<std::string> reached = {entry_function};
  while (!pending.empty()) {
    const std::string function = std::move(pending.back());
    pending.pop_back();
    if (meeting_functions_.contains(function)) return true;
    auto callees = callees_.find(function);
    if (callees == callees_.end()) continue;
    for (const std::string& callee : callees->second) {
      if (reached.insert(callee).second) pending.push_back(callee);
    }
  }
  return false;
}

// `kernel<<<grid, block>>>(...)` lexes as `<<` then `<`: a launch from a kernel.
void Parse::FindKernelLaunches() {
  CXFile file = clang_getFile(unit_, kSourcePath);
  const CXSourceRange whole =
      clang_getRange(clang_getLocationForOffset(unit_, file, 0),
                     clang_getLocationForOffset(unit_, file, static_cast<unsigned>(source_.size())));
  CXToken* tokens = nullptr;
  unsigned count = 0;
  clang_tokenize(unit_, whole, &tokens, &count);
  for (unsigned i = 0; i + 1 < count; ++i) {
    if (clang_getTokenKind(tokens[i]) != CXToken_Punctuation ||
        Take(clang_getTokenSpelling(unit_, tokens[i])) != "<<" ||
        Take(clang_getTokenSpelling(unit_, tokens[i + 1])) != "<") {
      continue;
    }
    const Place first = PlaceOf(clang_getTokenLocation(unit_, tokens[i]));
    const Place second = PlaceOf(clang_getTokenLocation(unit_, tokens[i + 1]));
    if (second.offset == first.offset + 2) {
      parsed_.unsupported.push_back({"dynamic parallelism (launching kernels from a kernel)",
                                     static_cast<int>(first.line)});
    }
  }
  clang_disposeTokens(unit_, tokens, count);
}

absl::StatusOr<CXCursor> Parse::FindEntryPoint() const {
  if (entry_declarations_.empty()) {
    return Invalid(1, absl::StrCat("entry point \"", entry_,
                                   "\" not found: declare it as extern \"C\" __global__ void ",
                                   entry_, "(...)"));
  }
  // The definition when there is one: it is what runs.
  CXCursor entry = entry_declarations_.front();
  for (CXCursor declaration : entry_declarations_) {
    if (clang_isCursorDefinition(declaration)) entry = declaration;
  }
  const unsigned line = PlaceOf(clang_getCursorLocation(entry)).line;
  if (clang_isInvalidDeclaration(entry)) {
    return Invalid(line, absl::StrCat("the declaration of ", entry_, " does not compile"));
  }
  const bool global = HasAnnotation(entry, "__global__");
  const bool c_linkage = Take(clang_Cursor_getMangling(entry)) == entry_;
  const bool returns_void = clang_getResultType(clang_getCursorType(entry)).kind == CXType_Void;
  if (!global || !c_linkage || !returns_void) {
    return Invalid(line, absl::StrCat("entry point \"", entry_, "\" must be declared extern \"C\" "
                                      "__global__ void ", entry_, "(...)"));
  }
  return entry;
}

absl::StatusOr<std::vector<KernelParam>> Parse::ReadParams(CXCursor entry) const {
  std::vector<KernelParam> params;
  const int count = clang_Cursor_getNumArguments(entry);
  for (int i = 0; i < count; ++i) {
    const CXCursor param = clang_Cursor_getArgument(entry, static_cast<unsigned>(i));
    const CXType type = clang_getCursorType(param);
    const CXType canonical = clang_getCanonicalType(type);
    if (clang_isInvalidDeclaration(param)) {
      return Invalid(PlaceOf(clang_getCursorLocation(param)).line,
                     absl::StrCat("parameter ", i, " of ", entry_, " does not compile"));
    }
    KernelParam& kernel_param = params.emplace_back();
    kernel_param.declared_type = Take(clang_getTypeSpelling(type));
    if (const std::string name = Take(clang_getCursorSpelling(param)); !name.empty()) {
      absl::StrAppend(&kernel_param.declared_type, " ", name);
    }
    const std::string canonical_name = Take(clang_getTypeSpelling(canonical));
    if (canonical.kind == CXType_Pointer) {
      kernel_param.kind = ParamKind::kBuffer;
      kernel_param.read_only = clang_isConstQualifiedType(clang_getPointeeType(canonical)) != 0;
    } else if (canonical.kind == CXType_Record &&
               Take(clang_getCursorSpelling(clang_getTypeDeclaration(canonical))) ==
                   "CUtensorMap_st") {
      kernel_param.kind = ParamKind::kTensorMap;
    } else if (absl::StatusOr<ScalarKind> scalar = ScalarKindOf(canonical); scalar.ok()) {
      kernel_param.kind = ParamKind::kScalar;
      kernel_param.scalar = *scalar;
    } else {
      return Invalid(PlaceOf(clang_getCursorLocation(param)).line,
                     absl::StrCat("parameter ", i, " of ", entry_, " (", kernel_param.declared_type,
                                  "): unsupported parameter type \"", canonical_name,
                                  "\"; kernels take pointers, int, unsigned, long long, "
                                  "unsigned long long, float, double or CUtensorMap"));
    }
  }
  return params;
}

absl::StatusOr<ParsedKernel> Parse::Read() {
  VisitChildren(clang_getTranslationUnitCursor(unit_),
                [&](CXCursor cursor) { return Visit(cursor, ""); });
  FindKernelLaunches();
  std::stable_sort(parsed_.unsupported.begin(), parsed_.unsupported.end(),
                   [](const UnsupportedUse& a, const UnsupportedUse& b) { return a.line < b.line; });
  RETURN_IF_ERROR(malformed_);
  RETURN_IF_ERROR(host_code_);
  ASSIGN_OR_RETURN(CXCursor entry, FindEntryPoint());
  ASSIGN_OR_RETURN(parsed_.params, ReadParams(entry));
  parsed_.threads_meet = EntryMeets(FunctionKey(entry));
  return parsed_;
}

}  // namespace

absl::StatusOr<ParsedKernel> ParseKernel(absl::string_view source, absl::string_view entry,
                                         const std::vector<std::string>& options,
                                         const std::string& resource_directory) {
  Parse parse(source, entry);
  RETURN_IF_ERROR(parse.Run(options, resource_directory));
  return parse.Read();
}

}  // namespace gpucmd
