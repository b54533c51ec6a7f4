#include "interrupt-watchdog.h"

#include <sqlite3.h>

#include "fuzz-util.h"

namespace qr::fuzz {

InterruptWatchdog::InterruptWatchdog(SqliteConnection* conn, CancelVia via,
                                     Clock::duration after, Clock::duration bound)
    : conn_(conn), via_(via), after_(after), bound_(bound), thread_([this] { Run(); }) {
  if (via_ == CancelVia::kProgressHandler) conn_->SetProgressHandler(&OnProgress, this);
}

InterruptWatchdog::~InterruptWatchdog() {
  {
    MutexLock l(&mu_);
    stop_ = true;
    cv_.NotifyAll();
  }
  thread_.join();
  if (via_ == CancelVia::kProgressHandler) conn_->SetProgressHandler(nullptr, nullptr);
}

int InterruptWatchdog::OnProgress(void* self) {
  return static_cast<InterruptWatchdog*>(self)->cancelled_.load(std::memory_order_relaxed);
}

void InterruptWatchdog::Arm(const std::string* sql) {
  MutexLock l(&mu_);
  sql_ = sql;
  armed_at_ = Clock::now();
  interrupted_at_.reset();
  cancelled_.store(false, std::memory_order_relaxed);
  cv_.NotifyAll();
}

std::optional<Clock::duration> InterruptWatchdog::Disarm() {
  const Clock::time_point now = Clock::now();
  std::optional<Clock::duration> late;
  const std::string* sql;
  {
    MutexLock l(&mu_);
    if (interrupted_at_) late = now - *interrupted_at_;
    sql = sql_;
    sql_ = nullptr;
    // Not woken: it finds nothing to watch at its next deadline, or is woken by Arm().
  }
  if (late && *late > bound_) ReportLate(*sql, *late);
  return late;
}

void InterruptWatchdog::InterruptLocked() {
  if (via_ == CancelVia::kInterrupt) {
    sqlite3_interrupt(conn_->db());
  } else {
    cancelled_.store(true, std::memory_order_relaxed);
  }
}

void InterruptWatchdog::Run() {
  MutexLock l(&mu_);
  while (!stop_) {
    const Clock::time_point now = Clock::now();
    if (sql_ == nullptr) {
      cv_.Wait(&mu_);
    } else if (!interrupted_at_ && now < armed_at_ + after_) {
      cv_.WaitUntil(&mu_, armed_at_ + after_);
    } else if (!interrupted_at_) {
      interrupted_at_ = now;
      InterruptLocked();
    } else if (now - *interrupted_at_ > bound_) {
      ReportLate(*sql_, now - *interrupted_at_);
    } else {
      cv_.WaitUntil(&mu_, *interrupted_at_ + bound_ + std::chrono::milliseconds(1));
    }
  }
}

void InterruptWatchdog::ReportLate(const std::string& sql, Clock::duration late) const {
  Fail(
      __FILE__, __LINE__,
      "a statement had not ended " + std::to_string(Millis(late)) + " ms after it was " +
          (via_ == CancelVia::kInterrupt ? "interrupted (sqlite3_interrupt)"
                                         : "cancelled (progress handler, every 1000 VM steps)") +
          "; the bound is " + std::to_string(Millis(bound_)) +
          " ms (QR_FUZZ_INTERRUPT_BOUND_MS). One call of a function cannot be interrupted: is "
          "one superlinear in its input?",
      sql);
}

}  // namespace qr::fuzz
