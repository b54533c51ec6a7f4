#pragma once

#include <atomic>
#include <cstdint>

/// A byte count with a limit, shared by many reservers: the base of the daemon's result-memory
/// budget (MemoryBudget) and of its spill budget (SpillBudget), and the two lock-free steps
/// both build their per-query accounts from.

namespace qr {

/// Adds 'bytes' to '*used' unless the sum would pass 'limit'; '*before' gets the value seen
/// (the one added to, or the one that refused). Relaxed: the counter orders no other data;
/// only the compare-and-swap on '*used' keeps the sum within the limit.
bool ReserveWithin(std::atomic<int64_t>* used, int64_t limit, int64_t bytes, int64_t* before);

/// Raises '*peak' to at least 'value'.
void RaisePeak(std::atomic<int64_t>* peak, int64_t value);

/// Reservations that would pass the limit are refused (and counted), never granted in part.
/// Thread-safety: thread-safe and lock-free.
class ByteBudget {
 public:
  /// 'limit_bytes' > 0.
  explicit ByteBudget(int64_t limit_bytes) : limit_bytes_(limit_bytes) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  /// Reserves 'bytes' (>= 0) if the total stays within the limit; false (and counted as a
  /// refusal) otherwise, with nothing reserved.
  bool TryReserve(int64_t bytes);
  /// Reserves 'bytes' even past the limit: for memory that must be held anyway.
  void Reserve(int64_t bytes);
  /// Returns 'bytes' that TryReserve() or Reserve() granted.
  void Release(int64_t bytes);

  int64_t limit_bytes() const { return limit_bytes_; }
  int64_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }
  /// The highest used_bytes() ever reached.
  int64_t peak_bytes() const { return peak_bytes_.load(std::memory_order_relaxed); }
  /// Reservations this budget's limit refused.
  int64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  const int64_t limit_bytes_;
  std::atomic<int64_t> used_bytes_{0};
  std::atomic<int64_t> peak_bytes_{0};
  std::atomic<int64_t> refusals_{0};
};

}  // namespace qr
