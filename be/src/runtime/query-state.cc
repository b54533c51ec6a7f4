#include "runtime/query-state.h"

#include <utility>

#include "runtime/long-query-gate.h"

namespace qr {

const char* QueryState::ExecStateName(ExecState s) {
  switch (s) {
    case ExecState::kCreated: return "CREATED";
    case ExecState::kQueued: return "QUEUED";
    case ExecState::kRunning: return "RUNNING";
    case ExecState::kFinished: return "FINISHED";
    case ExecState::kFailed: return "FAILED";
    case ExecState::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

QueryState::QueryState(const UniqueId& id, QueryContext ctx)
    : id_(id),
      ctx_(std::move(ctx)),
      result_buffer_(ctx_.result_buffer_max_rows, ctx_.result_buffer_max_bytes) {}

bool QueryState::Cancel(QueryError reason) {
  {
    MutexLock l(&lock_);
    if (cancel_reason_.has_value()) return false;
    cancel_reason_ = std::move(reason);
    // Relaxed is enough for the flag: the reason is read under 'lock_', never through it.
    cancelled_.store(true, std::memory_order_relaxed);
    // Stops the running statement before its next VM opcode (the project's SQLite checks
    // the flag there), not only at the progress handler's next call (1000 VM instructions
    // may be many expensive rows). Under 'lock_', so the executor cannot clear the target and
    // start another query in between.
    if (interrupt_target_ != nullptr) sqlite3_interrupt(interrupt_target_);
    // A long query waiting for its user's turn (LongQueryGate) stops waiting.
    if (parked_in_ != nullptr) parked_in_->WakeParked(this);
  }
  result_buffer_.Close();
  return true;
}

void QueryState::SetInterruptTarget(sqlite3* db) {
  MutexLock l(&lock_);
  interrupt_target_ = db;
  if (db != nullptr && cancel_reason_.has_value()) sqlite3_interrupt(db);
}

void QueryState::SetParkedIn(LongQueryGate* gate) {
  MutexLock l(&lock_);
  parked_in_ = gate;
}

void QueryState::InterruptStatement() {
  MutexLock l(&lock_);
  if (interrupt_target_ != nullptr) sqlite3_interrupt(interrupt_target_);
}

std::optional<QueryError> QueryState::cancel_reason() const {
  MutexLock l(&lock_);
  return cancel_reason_;
}

std::chrono::steady_clock::time_point QueryState::exec_start() const {
  return std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(exec_start_ns_.load(std::memory_order_relaxed)));
}

void QueryState::MarkExecStart() {
  exec_start_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                       std::memory_order_relaxed);
}

}  // namespace qr
