#pragma once

#include <cstdint>

#include "util/status.h"

namespace qr {

/// The process's limit on open file descriptors (RLIMIT_NOFILE).
struct FileLimit {
  /// The soft limit before RaiseFileLimit() changed it.
  uint64_t soft_before = 0;
  /// The soft and hard limits now.
  uint64_t soft = 0;
  uint64_t hard = 0;
};

/// Raises the soft RLIMIT_NOFILE to the hard limit (a daemon started from a shell often gets a
/// soft limit of 256 or 1024 whatever the hard limit allows), filling '*out'. An error (the
/// limits stay as they were, '*out' tells them) says what failed.
/// Thread-safety: process-wide; call it at start-up.
Status RaiseFileLimit(FileLimit* out);

}  // namespace qr
