#pragma once

// The statement fuzzer's interrupt probe (statement-fuzzer.cc): a watchdog that interrupts the
// statement being stepped on a connection and fails the run when it does not end in time.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "runtime/sqlite-connection.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr::fuzz {

using Clock = std::chrono::steady_clock;

inline int64_t Millis(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

/// How the watchdog stops a statement.
enum class CancelVia {
  /// sqlite3_interrupt(), which SQLite checks at every jump of its virtual machine.
  kInterrupt,
  /// What SqliteEngine does to cancel a query: a flag that the connection's progress handler
  /// polls every 1000 VM instructions (QR_FUZZ_CANCEL=progress).
  kProgressHandler,
};

/// Interrupts the statement being stepped on a connection 'after' its Arm(), and fails the
/// fuzz run, naming the statement, when it has not ended 'bound' after the interrupt: it is
/// then inside something SQLite cannot interrupt, such as one long function call.
/// Thread-safety: the fuzzing thread calls Arm() and Disarm() in turn; the watch runs on the
/// watchdog's own thread.
/// Ownership: borrows 'conn', which must outlive the watchdog.
class InterruptWatchdog {
 public:
  InterruptWatchdog(SqliteConnection* conn, CancelVia via, Clock::duration after,
                    Clock::duration bound);
  ~InterruptWatchdog();
  InterruptWatchdog(const InterruptWatchdog&) = delete;
  InterruptWatchdog& operator=(const InterruptWatchdog&) = delete;

  /// Starts watching 'sql', whose statement is about to be stepped.
  /// QR_REQUIRES: not armed; 'sql' lives until the matching Disarm().
  void Arm(const std::string* sql);
  /// Ends the watch (the statement ended). Returns how long after the interrupt that was;
  /// nullopt if the statement ended before its interrupt.
  std::optional<Clock::duration> Disarm();

  Clock::duration bound() const { return bound_; }

 private:
  static int OnProgress(void* self);
  void Run();
  void InterruptLocked() QR_REQUIRES(mu_);
  /// Fails the fuzz run: 'sql' had not ended 'late' after its interrupt.
  [[noreturn]] void ReportLate(const std::string& sql, Clock::duration late) const;

  SqliteConnection* const conn_;
  const CancelVia via_;
  const Clock::duration after_;
  const Clock::duration bound_;
  /// Set by the interrupt when 'via_' is kProgressHandler, polled by OnProgress(); relaxed:
  /// it orders nothing else, and the next poll after the store sees it.
  std::atomic<bool> cancelled_{false};
  /// Protects the watch below; a leaf (sqlite3_interrupt() is called while it is held, and
  /// takes no lock that the stepping thread holds).
  Mutex mu_;
  CondVar cv_;
  bool stop_ QR_GUARDED_BY(mu_) = false;
  /// The statement being watched; nullptr while not armed.
  const std::string* sql_ QR_GUARDED_BY(mu_) = nullptr;
  Clock::time_point armed_at_ QR_GUARDED_BY(mu_);
  std::optional<Clock::time_point> interrupted_at_ QR_GUARDED_BY(mu_);
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace qr::fuzz
