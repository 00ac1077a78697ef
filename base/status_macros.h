#ifndef GPUCMDD_BASE_STATUS_MACROS_H_
#define GPUCMDD_BASE_STATUS_MACROS_H_

// RETURN_IF_ERROR and ASSIGN_OR_RETURN, which Debian's abseil (20220623) lacks.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                                   \
  do {                                                          \
    if (::absl::Status gpucmd_status_ = (expr); !gpucmd_status_.ok()) { \
      return gpucmd_status_;                                    \
    }                                                           \
  } while (false)

#define GPUCMD_CONCAT_INNER_(a, b) a##b
#define GPUCMD_CONCAT_(a, b) GPUCMD_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::StatusOr<T>); returns its status if not OK, otherwise
// moves the value into `lhs` (a declaration such as `auto x` or an existing lvalue).
#define ASSIGN_OR_RETURN(lhs, expr) \
  GPUCMD_ASSIGN_OR_RETURN_IMPL_(GPUCMD_CONCAT_(gpucmd_statusor_, __LINE__), lhs, expr)

#define GPUCMD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

#endif  // GPUCMDD_BASE_STATUS_MACROS_H_
