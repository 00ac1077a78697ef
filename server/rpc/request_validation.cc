#include "server/rpc/request_validation.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace gpucmd {
namespace {

// Guards the end of a byte range against 64-bit wrap-around.
absl::Status CheckNoOverflow(uint64_t offset, uint64_t size, absl::string_view what) {
  if (size > UINT64_MAX - offset) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": offset ", offset, " + size ", size, " overflows 64 bits"));
  }
  return absl::OkStatus();
}

// Session tokens are 32 hex digits (SessionRegistry); kernel ids 64 (CompileCache).
constexpr size_t kMaxSessionTokenBytes = 64;
constexpr size_t kKernelIdDigits = 64;
constexpr size_t kMaxEntryPointBytes = 256;

bool IsIdentifier(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// A request that names a range of a buffer by offset_bytes and either size_bytes or a
// pitched layout (a read, a fill): `what` names it.
template <typename RangeRequest>
absl::Status ValidateRange(const RangeRequest& request, const char* what) {
  RETURN_IF_ERROR(ValidateSessionToken(request.session()));
  if (request.has_pitched()) {
    RETURN_IF_ERROR(ValidatePitchedLayout(request.pitched()));
    if (request.size_bytes() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": give either size_bytes (contiguous) or pitched, not both"));
    }
    return absl::OkStatus();
  }
  return CheckNoOverflow(request.offset_bytes(), request.size_bytes(), what);
}

// Rows of `width` bytes, `stride` apart: the stride (named `stride_name`) at least the
// width, and their span within 64 bits. `what` names the layout in messages.
absl::Status CheckRows(uint64_t width, uint64_t height, uint64_t stride, absl::string_view what,
                       absl::string_view stride_name) {
  if (stride < width) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", stride_name, " ", stride, " is smaller than width_bytes ", width));
  }
  if (height != 0 && stride > UINT64_MAX / height) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", stride_name, " * height overflows"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateKernelId(const std::string& kernel_id) {
  if (kernel_id.empty()) return absl::InvalidArgumentError("kernel_id is required");
  const bool hex = std::all_of(kernel_id.begin(), kernel_id.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
  });
  if (kernel_id.size() > kKernelIdDigits || !hex) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel_id is not one Compile returns (", kKernelIdDigits, " hex digits); got ",
        kernel_id.size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status ValidateOpenSession(const v1::OpenSessionRequest& request, int device_count) {
  if (request.device() >= static_cast<uint32_t>(device_count)) {
    return absl::InvalidArgumentError(absl::StrCat("device ", request.device(),
                                                   " does not exist; this daemon has ",
                                                   device_count, " device(s)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSessionToken(const std::string& session) {
  if (session.empty()) return absl::InvalidArgumentError("session is required");
  if (session.size() > kMaxSessionTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "session is ", session.size(), " bytes: not a token OpenSession returns"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAllocate(const v1::AllocateRequest& request) {
  RETURN_IF_ERROR(ValidateSessionToken(request.session()));
  if (request.size_bytes() == 0) {
    return absl::InvalidArgumentError("size_bytes must be positive");
  }
  return absl::OkStatus();
}

absl::Status ValidatePitchedLayout(const v1::PitchedLayout& layout) {
  return CheckRows(layout.width_bytes(), layout.height(), layout.stride_bytes(), "pitched layout",
                   "stride_bytes");
}

absl::Status ValidateWriteHeader(const v1::WriteHeader& header) {
  RETURN_IF_ERROR(ValidateSessionToken(header.session()));
  if (header.has_pitched()) RETURN_IF_ERROR(ValidatePitchedLayout(header.pitched()));
  switch (header.source_case()) {
    case v1::WriteHeader::kInlineSizeBytes:
      return CheckNoOverflow(header.offset_bytes(), header.inline_size_bytes(), "write");
    case v1::WriteHeader::kSharedMemory:
      return CheckNoOverflow(header.offset_bytes(), header.shared_memory().size_bytes(),
                             "write");
    case v1::WriteHeader::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "write header names no source: set inline_size_bytes or shared_memory");
}

absl::Status ValidateRead(const v1::ReadRequest& request) { return ValidateRange(request, "read"); }

absl::Status ValidateCopy(const v1::CopyRequest& request) {
  RETURN_IF_ERROR(ValidateSessionToken(request.session()));
  if (request.has_pitched()) {
    if (request.size_bytes() != 0) {
      return absl::InvalidArgumentError(
          "copy: give either size_bytes (contiguous) or pitched, not both");
    }
    const v1::PitchedCopyRows& rows = request.pitched();
    RETURN_IF_ERROR(CheckRows(rows.width_bytes(), rows.height(), rows.source_stride_bytes(),
                              "pitched copy", "source_stride_bytes"));
    return CheckRows(rows.width_bytes(), rows.height(), rows.target_stride_bytes(), "pitched copy",
                     "target_stride_bytes");
  }
  RETURN_IF_ERROR(
      CheckNoOverflow(request.source_offset_bytes(), request.size_bytes(), "copy source"));
  return CheckNoOverflow(request.target_offset_bytes(), request.size_bytes(), "copy target");
}

absl::Status ValidateFill(const v1::FillRequest& request) { return ValidateRange(request, "fill"); }

absl::Status ValidateCompile(const v1::CompileRequest& request) {
  RETURN_IF_ERROR(ValidateSessionToken(request.session()));
  if (request.source().empty()) return absl::InvalidArgumentError("source is empty");
  if (request.entry_point().empty()) {
    return absl::InvalidArgumentError("entry_point is required");
  }
  if (request.entry_point().size() > kMaxEntryPointBytes || !IsIdentifier(request.entry_point())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "entry_point must name an extern \"C\" function: an identifier of at most ",
        kMaxEntryPointBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLaunch(const v1::LaunchRequest& request) {
  RETURN_IF_ERROR(ValidateSessionToken(request.session()));
  return ValidateKernelId(request.kernel_id());
}

}  // namespace gpucmd
