#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/byte-budget.h"

namespace qr {

/// The process-wide byte budget for query results (--max_result_memory_mb): the page an
/// executor is encoding, and every encoded page until its last reference (result buffer, retry
/// copy, response) is dropped.
/// Thread-safety: thread-safe (lock-free).
class MemoryBudget : public ByteBudget {
 public:
  using ByteBudget::ByteBudget;
};

/// Wraps 'text' as an immutable shared page whose 'reserved' bytes of 'budget' (may be null)
/// are released when its last reference is dropped.
std::shared_ptr<const std::string> MakeAccountedPage(std::string text, int64_t reserved,
                                                     MemoryBudget* budget);

/// "16.0 MiB": a byte count for error messages.
std::string FormatBytes(int64_t bytes);

}  // namespace qr
