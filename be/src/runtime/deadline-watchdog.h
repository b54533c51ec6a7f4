#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace qr {

class QueryState;

/// Interrupts a running statement at its query's time limit (--exec_time_limit_s), wherever it
/// is. The query runner's own checks (SQLite's progress handler, the checkpoints in our
/// functions and in SQLite's allocations) read the clock only between VM loop iterations or
/// every 64 KiB of work; a row of many operations on large values that neither loops nor
/// allocates (text-to-number conversions, comparisons) ran past the limit to its end. At the
/// deadline this thread calls QueryState::InterruptStatement() (sqlite3_interrupt()), and the
/// project's SQLite stops before its next opcode (third_party/sqlite/, docs/architecture.md,
/// "The interrupt before every opcode").
///
/// One thread per engine. It sleeps until the earliest armed deadline; Arm() wakes it only
/// when the new deadline comes before the moment it will wake anyway, so back-to-back queries
/// under one time limit cost two uncontended lock/unlock pairs each and no wakeup; an idle
/// engine has no periodic wakeup.
/// Thread-safety: all methods are thread-safe. Lock order: the watchdog's lock before a
/// QueryState's (InterruptStatement() runs under the former).
class DeadlineWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// Starts the thread ("qr-deadlines").
  DeadlineWatchdog();
  /// Stops and joins the thread.
  ~DeadlineWatchdog();
  DeadlineWatchdog(const DeadlineWatchdog&) = delete;
  DeadlineWatchdog& operator=(const DeadlineWatchdog&) = delete;

  /// At 'deadline' (unless Disarm()ed before) 'query'->InterruptStatement() is called, once.
  /// A query is armed at most once at a time.
  void Arm(QueryState* query, Clock::time_point deadline);
  /// After this returns, the watchdog no longer touches 'query'. No-op when not armed.
  void Disarm(QueryState* query);

  /// Statements interrupted at their deadline so far.
  int64_t num_fired() const { return fired_total_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    QueryState* query;
    Clock::time_point deadline;
  };
  void Loop();

  mutable Mutex lock_;
  CondVar wake_;
  std::vector<Entry> armed_ QR_GUARDED_BY(lock_);
  /// When the loop will wake next (time_point::max(): only when notified).
  Clock::time_point wake_at_ QR_GUARDED_BY(lock_) = Clock::time_point::max();
  bool stopping_ QR_GUARDED_BY(lock_) = false;
  std::atomic<int64_t> fired_total_{0};
  std::thread thread_;
};

}  // namespace qr
