#pragma once

/// Checkpoints inside one SQLite VM step.
///
/// SQLite's progress handler runs between VM instructions, so a single call of a SQL function
/// over a 16 MiB value (a search, a repeat) runs tens of milliseconds without it: a cancel, a
/// time limit or shutdown waits for the call, and a long query's executor cannot yield the CPU
/// to a short query's thread (LongQueryDemoter::Options::yield_us). Our own functions call
/// StepCheckpoint::Check() every ~64 KiB of work; the query runner installs, for the thread and
/// the statement it runs, what its progress handler does there.
///
/// SQLite's own built-ins and operators (upper, hex, ||, substr, a column's load...) cannot
/// check, and a row of many of them on large values ran back to back (fifty upper() calls on
/// 2 MiB: ~0.4 s). Nearly all of them allocate their result, so the accounting allocator of
/// SQLite's heap (sqlite-heap.h) reports each allocation to Allocating(): every
/// kCheckpointBytes allocated the check runs (without yielding), and once it says stop every
/// allocation of the thread is refused until the check is uninstalled. SQLite then fails the
/// statement with SQLITE_NOMEM, which the query runner reports as the cancel or time limit
/// that stopped it.
/// Thread-safety: per thread (the installed check is thread-local).

#include <cstddef>
#include <cstdint>

namespace qr {

/// Bytes of work between two checks.
constexpr size_t kCheckpointBytes = size_t{64} << 10;

class StepCheckpoint {
 public:
  /// The check: true if the statement must stop. Called on the installing thread only.
  /// 'may_yield' is false where the check must neither block nor yield the CPU (inside
  /// SQLite's allocator, perhaps under one of SQLite's process-wide mutexes).
  using Fn = bool (*)(void* arg, bool may_yield);

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

  /// Counts an allocation of 'bytes' by SQLite on this thread and runs the check (no yield)
  /// whenever kCheckpointBytes have been allocated since the last one; true if the allocation
  /// must be refused: the check said stop, now or earlier under the same installation.
  /// Cheap on a thread with no check (one thread-local test).
  static bool Allocating(size_t bytes);
  /// Allocations Allocating() refused, process-wide.
  static int64_t AllocationsRefused();
};

/// Counts a function call's work on the thread's Charge() count, so that a check runs every
/// kCheckpointBytes of work within one call and across the calls of a row.
/// Thread-safety: one instance per call.
class WorkCheckpoints {
 public:
  /// Reports 'bytes' of work; true if the statement must stop (then on every later call).
  bool Advance(size_t bytes) {
    if (!stopped_) stopped_ = StepCheckpoint::Charge(bytes);
    return stopped_;
  }
  /// True once a check said stop (the function then answers SQLITE_INTERRUPT).
  bool stopped() const { return stopped_; }

 private:
  bool stopped_ = false;
};

}  // namespace qr
