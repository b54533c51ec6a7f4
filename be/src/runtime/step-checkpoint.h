#pragma once

/// Checkpoints inside one SQLite VM step.
///
/// SQLite's progress handler runs between VM instructions, so a single call of a SQL function
/// over a 16 MiB value (a search, a repeat) runs tens of milliseconds without it: a cancel, a
/// time limit or shutdown waits for the call, and a long query's executor cannot yield the CPU
/// to a short query's thread (LongQueryDemoter::Options::yield_us). Our own functions call
/// StepCheckpoint::Check() every ~64 KiB of work; the query runner installs, for the thread and
/// the statement it runs, what its progress handler does there.
/// Thread-safety: per thread (the installed check is thread-local).

#include <cstddef>

namespace qr {

/// Bytes of work between two checks.
constexpr size_t kCheckpointBytes = size_t{64} << 10;

class StepCheckpoint {
 public:
  /// The check: true if the statement must stop. Called on the installing thread only.
  using Fn = bool (*)(void* arg);

  /// Installs 'fn(arg)' as this thread's check until destroyed (not nested).
  StepCheckpoint(Fn fn, void* arg);
  ~StepCheckpoint();
  StepCheckpoint(const StepCheckpoint&) = delete;
  StepCheckpoint& operator=(const StepCheckpoint&) = delete;

  /// Runs this thread's check (it may yield the CPU); true if the statement must stop, in
  /// which case the function answers SQLITE_INTERRUPT. False on a thread with no check.
  static bool Check();

  /// Counts 'bytes' of work on this thread, across calls, and runs Check() whenever
  /// kCheckpointBytes have accumulated since the last check; true if the statement must stop.
  /// For built-ins that cannot check inside one call (GuardedBuiltins): checked before each
  /// large call, a row of many such calls stops between two of them.
  static bool Charge(size_t bytes);
};

/// Counts a function call's work and runs StepCheckpoint::Check() every kCheckpointBytes.
/// Thread-safety: one instance per call.
class WorkCheckpoints {
 public:
  /// Reports 'bytes' of work; true if the statement must stop.
  bool Advance(size_t bytes) {
    since_ += bytes;
    if (since_ < kCheckpointBytes) return false;
    since_ = 0;
    stopped_ = StepCheckpoint::Check();
    return stopped_;
  }
  /// True once a check said stop (the function then answers SQLITE_INTERRUPT).
  bool stopped() const { return stopped_; }

 private:
  size_t since_ = 0;
  bool stopped_ = false;
};

}  // namespace qr
