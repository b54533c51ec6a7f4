#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace qr {

/// A process-wide byte budget for query results: the page an executor is encoding, and every
/// encoded page until its last reference (result buffer, retry copy, response) is dropped.
/// Reservations that would pass the limit are refused, never granted in part.
/// Thread-safety: thread-safe (lock-free).
class MemoryBudget {
 public:
  /// 'limit_bytes' > 0.
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}

  /// Reserves 'bytes' (>= 0) if the total stays within the limit; false (and counted as a
  /// refusal) otherwise.
  bool TryReserve(int64_t bytes);
  void Release(int64_t bytes);
  /// Reserves 'bytes' even past the limit: for memory that must be held anyway.
  void Reserve(int64_t bytes);

  int64_t limit_bytes() const { return limit_; }
  int64_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  int64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> refusals_{0};
};

/// Wraps 'text' as an immutable shared page whose 'reserved' bytes of 'budget' (may be null)
/// are released when its last reference is dropped.
std::shared_ptr<const std::string> MakeAccountedPage(std::string text, int64_t reserved,
                                                     MemoryBudget* budget);

/// "16.0 MiB": a byte count for error messages.
std::string FormatBytes(int64_t bytes);

}  // namespace qr
