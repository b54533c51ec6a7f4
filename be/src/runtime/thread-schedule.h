#pragma once

// The kernel's scheduler slice of a thread (sched_setattr's sched_runtime for SCHED_OTHER).

#include <sys/types.h>

#include <cstdint>

namespace qr {

/// The range Linux accepts for a SCHED_OTHER slice (EEVDF, 6.12 and later).
inline constexpr int32_t kMinSchedulerSliceUs = 100;
inline constexpr int32_t kMaxSchedulerSliceUs = 100000;

/// Puts thread 'tid' (0: the caller) under SCHED_OTHER at nice 'nice' and asks for a
/// scheduler slice of 'slice_us' microseconds (0: the kernel's default, about 0.7 ms times
/// 1 + log2 of the CPU count). One sched_setattr(2) call, the cost of the setpriority(2) it
/// replaces.
///
/// Why: since Linux 6.12 (EEVDF with custom slices) a thread that wakes up with a shorter
/// slice than the running one preempts it at once; with equal slices it waits until the
/// running thread's slice is used up, which the scheduler checks at the next tick (4 ms on
/// this project's machines). So HTTP I/O threads and executors of short queries ask for a
/// short slice and a demoted long query's executor goes back to the default: a `SELECT 1`
/// waking beside CPU-bound long queries runs at once instead of a tick or more later
/// (docs/benchmarks.md, "Scheduler slices"). Earlier kernels accept the call and ignore the
/// slice. Raising the nice value is always allowed; lowering it needs CAP_SYS_NICE or
/// RLIMIT_NICE, as with setpriority(2). Returns false (errno set) if the call failed.
bool SetFairSchedule(pid_t tid, int nice, int32_t slice_us);

/// Asks for a slice of 'slice_us' for the calling thread, keeping its nice value; does
/// nothing (and returns true) unless it runs under SCHED_OTHER. False (errno set) if the
/// call failed.
bool SetOwnSchedulerSlice(int32_t slice_us);

/// Whether the nice values of this process's threads weigh only against each other: the
/// kernel schedules each session as one group ("autogroup", /proc/sys/kernel/
/// sched_autogroup_enabled) and this process leads its own session, as a systemd service or a
/// process started with setsid(1) does. Otherwise a demoted long query's raised nice value
/// competes with every process of the session (nice 19: weight 15 against 1024), and a busy
/// neighbour starves it. (A cgroup of its own with the cpu controller has the same effect;
/// it is not detected.)
bool NiceIsLocalToProcess();

/// The nice value and slice (nanoseconds; what the kernel reports, its default when none
/// was asked for, 0 before 6.12) of thread 'tid' (0: the caller); false if unreadable.
bool GetFairSchedule(pid_t tid, int* nice, uint64_t* slice_ns);

}  // namespace qr
