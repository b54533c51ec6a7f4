#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace qr {

/// Gives short queries the CPU first: the executor thread of a query that has been executing
/// for longer than 'after_ms' gets a lower CPU priority (its nice value raised by
/// 'nice_increment', or the SCHED_IDLE policy, per thread), and gets its priority back when
/// the query ends.
///
/// With one executor thread per running slot, the kernel shares the cores between every
/// running query; without this, a `SELECT 1` admitted beside a dozen long sorts waits for a
/// dozen time slices. CFS weighs nice 10 at about a tenth of nice 0, so a demoted thread still
/// makes progress (no starvation) but a short query preempts it at once. A dozen runnable
/// nice-10 threads still weigh more than one nice-0 thread (12 x 110 against 1024), so
/// Policy::kIdle uses SCHED_IDLE instead (weight 3: 12 of them weigh 36): the long queries
/// then run on what the short ones leave.
///
/// Raising a thread's nice value (or setting SCHED_IDLE) is always allowed; lowering it again
/// (or leaving SCHED_IDLE) needs CAP_SYS_NICE or an RLIMIT_NICE of at least 20 - base. A thread that cannot get its priority back is
/// retired instead: End() says so, the executor returns from its loop, and the demoter's own
/// thread (which runs at the base priority, and whose children inherit it) starts a
/// replacement through 'respawn'.
///
/// Call sequence: an executor calls Begin(slot) before a query and End(slot) after it. The
/// demoter's thread sleeps until the earliest moment a running query becomes long (or, with
/// nothing running, until a Begin() wakes it), so an idle daemon has no periodic wakeups.
/// Thread-safety: all methods are thread-safe.
class LongQueryDemoter {
 public:
  /// How a long query's executor is demoted.
  enum class Policy {
    /// Its nice value is raised by 'nice_increment' (CFS weight 110 at nice 10, 15 at 19).
    kNice,
    /// It runs under SCHED_IDLE (CFS weight 3) until the query ends.
    kIdle,
  };

  struct Options {
    /// A query executing for longer than this is demoted; 0 disables the demoter.
    int64_t after_ms = 200;
    /// Added to the base nice value (capped at 19); 0 disables the demoter.
    int nice_increment = 10;
    /// Tests: behave as if the process could not lower a nice value (every demoted thread is
    /// replaced).
    bool never_restore = false;
    Policy policy = Policy::kNice;
    /// The scheduler slice (microseconds) executors ask for while their query is short;
    /// a demoted one goes back to the kernel's default (thread-schedule.h). 0: executors keep
    /// the kernel's default throughout. Only for executors under SCHED_OTHER.
    int32_t slice_us = 0;
    /// A query's executor yields the CPU (sched_yield) after each this many microseconds of
    /// its run, from the first such interval on (demoted or not), between SQLite's VM steps
    /// (the query runner's progress handler; one clock read per 1000 VM steps) and inside
    /// our long function calls (StepCheckpoint). A short query's thread that wakes beside a
    /// running one does not always preempt it at once (under EEVDF, apparently when the woken
    /// thread is not owed CPU time); without a yield it then waits for the next scheduler
    /// tick (4 ms) (docs/architecture.md, "Long queries yield between VM steps"). 0: never.
    int32_t yield_us = 0;
  };

  /// 'respawn(slot)' is called on the demoter's thread, with no lock held, to replace the
  /// executor of 'slot' that retired (see End()). Starts the demoter's thread if enabled.
  LongQueryDemoter(const Options& options, int num_slots, std::function<void(int)> respawn);
  /// Stop()s.
  ~LongQueryDemoter();
  LongQueryDemoter(const LongQueryDemoter&) = delete;
  LongQueryDemoter& operator=(const LongQueryDemoter&) = delete;

  /// Stops and joins the demoter's thread: no respawn happens after Stop() returns (a thread
  /// retiring later simply ends). Begin()/End() remain callable. Idempotent.
  void Stop();

  bool enabled() const { return enabled_; }

  /// The calling thread becomes an executor: asks for the short slice (Options::slice_us).
  /// Called once per executor thread, before its first query.
  void ExecutorStarted();
  /// The calling thread, executor of 'slot', starts a query.
  void Begin(int slot);
  /// The query of 'slot' ended; restores the calling thread's priority if it was lowered.
  /// Returns false when that failed: the caller must retire (return from its loop without
  /// running another query); its slot is respawned.
  [[nodiscard]] bool End(int slot);

  /// Queries demoted so far; executor threads replaced because their priority could not be
  /// restored.
  int64_t num_demoted() const { return demoted_total_.load(std::memory_order_relaxed); }
  int64_t num_replaced() const { return replaced_total_.load(std::memory_order_relaxed); }
  /// The nice value executors run at, and the one a long query's executor gets.
  /// (Under Policy::kIdle the nice value is not changed: demoted_nice() == base_nice().)
  int base_nice() const { return base_nice_; }
  int demoted_nice() const { return demoted_nice_; }
  Policy policy() const { return options_.policy; }
  /// "nice N" or "SCHED_IDLE": how a long query's executor runs, for logs.
  std::string DemotedDescription() const;

 private:
  struct Slot {
    bool active = false;
    bool demoted = false;
    pid_t tid = 0;
    std::chrono::steady_clock::time_point start{};
  };
  void Loop();
  /// Demotes the slots that became long by 'now'; returns the earliest moment another one
  /// will (time_point::max() when none is running undemoted).
  std::chrono::steady_clock::time_point DemoteDueLocked(std::chrono::steady_clock::time_point now)
      QR_REQUIRES(lock_);

  const Options options_;
  const bool enabled_;
  const int base_nice_;
  const int demoted_nice_;
  /// The scheduling policy executors run under (SCHED_OTHER unless started otherwise).
  const int base_policy_;
  /// Options::slice_us, when it applies (executors under SCHED_OTHER); else 0.
  const int32_t slice_us_;
  const std::function<void(int)> respawn_;

  mutable Mutex lock_;
  /// Signalled by Begin() while the loop waits with nothing to demote, by a retiring
  /// executor, and by Stop().
  CondVar wake_;
  std::vector<Slot> slots_ QR_GUARDED_BY(lock_);
  /// Slots whose executor retired and awaits a replacement.
  std::vector<int> retired_ QR_GUARDED_BY(lock_);
  /// True while the loop waits without a deadline (nothing to demote).
  bool waiting_idle_ QR_GUARDED_BY(lock_) = false;
  bool stopping_ QR_GUARDED_BY(lock_) = false;
  std::atomic<int64_t> demoted_total_{0};
  std::atomic<int64_t> replaced_total_{0};
  std::thread thread_;
};

}  // namespace qr
