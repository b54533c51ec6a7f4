// sched_setattr(2)/sched_getattr(2) for SCHED_OTHER threads (thread-schedule.h).

#include "runtime/thread-schedule.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>

namespace qr {
namespace {

/// The kernel's struct sched_attr, first version (SCHED_ATTR_SIZE_VER0, 48 bytes): glibc 2.36
/// has no wrapper, and <linux/sched/types.h> cannot be included beside <sched.h>.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(SchedAttr) == 48);

}  // namespace

bool NiceIsLocalToProcess() {
  if (getsid(0) != getpid()) return false;
  std::ifstream f("/proc/sys/kernel/sched_autogroup_enabled");
  int enabled = 0;
  return f >> enabled && enabled == 1;
}

bool SetFairSchedule(pid_t tid, int nice, int32_t slice_us) {
  SchedAttr attr{};
  attr.size = sizeof(attr);
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = nice;
  attr.sched_runtime = static_cast<uint64_t>(slice_us > 0 ? slice_us : 0) * 1000;
  return syscall(SYS_sched_setattr, tid, &attr, 0u) == 0;
}

bool SetOwnSchedulerSlice(int32_t slice_us) {
  SchedAttr attr{};
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0u) != 0) return false;
  if (attr.sched_policy != SCHED_OTHER) return true;
  return SetFairSchedule(0, attr.sched_nice, slice_us);
}

bool GetFairSchedule(pid_t tid, int* nice, uint64_t* slice_ns) {
  SchedAttr attr{};
  if (syscall(SYS_sched_getattr, tid, &attr, sizeof(attr), 0u) != 0) return false;
  *nice = attr.sched_nice;
  *slice_ns = attr.sched_runtime;
  return true;
}

}  // namespace qr
