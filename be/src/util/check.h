#pragma once

// Assertions for the registry's public headers, which must not depend on glog: a failed check
// prints what failed and where to stderr and aborts. The daemon's own code keeps glog's CHECK.

#include <string_view>

namespace qr::internal {
/// Prints "file:line: check failed: 'condition': message" to stderr and aborts.
[[noreturn, gnu::cold]] void CheckFailed(const char* file, int line, const char* condition,
                                         std::string_view message);
}  // namespace qr::internal

/// Aborts with 'message' (anything convertible to std::string_view, evaluated only on failure)
/// unless 'condition' holds. Always on.
#define QR_CHECK(condition, message)                                              \
  do {                                                                            \
    if (!(condition)) [[unlikely]] {                                              \
      ::qr::internal::CheckFailed(__FILE__, __LINE__, #condition, (message));     \
    }                                                                             \
  } while (0)

/// QR_CHECK in debug builds; in NDEBUG builds neither argument is evaluated.
#ifdef NDEBUG
#define QR_DCHECK(condition, message) \
  do {                                \
    if (false) {                      \
      (void)(condition);              \
      (void)(message);                \
    }                                 \
  } while (0)
#else
#define QR_DCHECK(condition, message) QR_CHECK(condition, message)
#endif
