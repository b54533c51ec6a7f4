#include "runtime/long-query-demoter.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <glog/logging.h>

#include "runtime/thread-schedule.h"

namespace qr {

namespace {

using Clock = std::chrono::steady_clock;

pid_t CurrentTid() {
  thread_local const pid_t tid = gettid();
  return tid;
}

/// The calling thread's nice value (Linux keeps one per thread).
int CurrentNice() {
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(CurrentTid()));
  return errno == 0 ? nice : 0;
}

/// The calling thread's scheduling policy (SCHED_OTHER if it cannot be read).
int CurrentPolicy() {
  const int policy = sched_getscheduler(0);
  return policy < 0 ? SCHED_OTHER : (policy & ~SCHED_RESET_ON_FORK);
}

/// Sets the scheduling policy of thread 'tid' (0: the caller) to a non-real-time 'policy'.
bool SetPolicy(pid_t tid, int policy) {
  sched_param param{};
  param.sched_priority = 0;
  return sched_setscheduler(tid, policy, &param) == 0;
}

}  // namespace

LongQueryDemoter::LongQueryDemoter(const Options& options, int num_slots,
                                   std::function<void(int)> respawn)
    : options_(options),
      enabled_(options.after_ms > 0 &&
               (options.policy == Policy::kIdle
                    ? CurrentPolicy() != SCHED_IDLE
                    : options.nice_increment > 0 && CurrentNice() < 19)),
      base_nice_(CurrentNice()),
      demoted_nice_(options.policy == Policy::kIdle
                        ? base_nice_
                        : std::min(19, base_nice_ + std::max(0, options.nice_increment))),
      base_policy_(CurrentPolicy()),
      slice_us_(base_policy_ == SCHED_OTHER ? options.slice_us : 0),
      respawn_(std::move(respawn)) {
  {
    MutexLock l(&lock_);
    slots_.resize(static_cast<size_t>(num_slots));
  }
  if (!enabled_) return;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "qr-demoter");
    Loop();
  });
}

LongQueryDemoter::~LongQueryDemoter() { Stop(); }

std::string LongQueryDemoter::DemotedDescription() const {
  return options_.policy == Policy::kIdle ? std::string("SCHED_IDLE")
                                          : "nice " + std::to_string(demoted_nice_);
}

void LongQueryDemoter::Stop() {
  {
    MutexLock l(&lock_);
    stopping_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void LongQueryDemoter::Begin(int slot) {
  if (!enabled_) return;
  bool wake = false;
  {
    MutexLock l(&lock_);
    Slot& s = slots_[static_cast<size_t>(slot)];
    s.active = true;
    s.demoted = false;
    s.tid = CurrentTid();
    s.start = Clock::now();
    // A loop with a deadline will see this query by then: its deadline is later.
    wake = waiting_idle_;
  }
  if (wake) wake_.NotifyOne();
}

void LongQueryDemoter::ExecutorStarted() {
  if (slice_us_ == 0) return;
  if (!SetOwnSchedulerSlice(slice_us_)) {
    LOG_FIRST_N(WARNING, 1) << "Executor threads cannot ask for a " << slice_us_
                            << " us scheduler slice: " << std::strerror(errno)
                            << "; they keep the kernel's default";
  }
}

bool LongQueryDemoter::End(int slot) {
  if (!enabled_) return true;
  bool demoted;
  {
    MutexLock l(&lock_);
    Slot& s = slots_[static_cast<size_t>(slot)];
    demoted = s.demoted;
    s.active = false;
    s.demoted = false;
  }
  if (!demoted) return true;
  // With a slice, one call restores the policy or nice value and the short slice.
  const bool restored =
      !options_.never_restore &&
      (slice_us_ > 0 ? SetFairSchedule(CurrentTid(), base_nice_, slice_us_)
       : options_.policy == Policy::kIdle
           ? SetPolicy(CurrentTid(), base_policy_)
           : setpriority(PRIO_PROCESS, static_cast<id_t>(CurrentTid()), base_nice_) == 0);
  if (restored) return true;
  if (!options_.never_restore) {
    LOG_FIRST_N(WARNING, 1)
        << "An executor thread cannot get back its CPU priority (from " << DemotedDescription()
        << " to nice " << base_nice_ << "): " << std::strerror(errno)
        << "; each executor that ran a long query is replaced by a new thread. Grant "
           "CAP_SYS_NICE or raise RLIMIT_NICE (systemd: LimitNICE=) to avoid that";
  }
  {
    MutexLock l(&lock_);
    retired_.push_back(slot);
  }
  wake_.NotifyAll();
  return false;
}

Clock::time_point LongQueryDemoter::DemoteDueLocked(Clock::time_point now) {
  const auto after = std::chrono::milliseconds(options_.after_ms);
  Clock::time_point next = Clock::time_point::max();
  for (Slot& s : slots_) {
    if (!s.active || s.demoted) continue;
    const Clock::time_point due = s.start + after;
    if (due > now) {
      next = std::min(next, due);
      continue;
    }
    // Under the lock, so that End() cannot run between the check and the call: the thread is
    // still the slot's executor, running the same query.
    // Under the nice policy the thread also goes back to the default slice, so that short
    // queries' executors (short slices) preempt it when they wake (thread-schedule.h).
    const bool ok = options_.policy == Policy::kIdle ? SetPolicy(s.tid, SCHED_IDLE)
                    : slice_us_ > 0 ? SetFairSchedule(s.tid, demoted_nice_, 0)
                    : setpriority(PRIO_PROCESS, static_cast<id_t>(s.tid), demoted_nice_) == 0;
    if (!ok) {
      LOG_FIRST_N(WARNING, 1) << "Cannot lower the CPU priority of executor thread " << s.tid
                              << ": " << std::strerror(errno);
    }
    s.demoted = true;  // also on failure: it is not retried
    demoted_total_.fetch_add(1, std::memory_order_relaxed);
  }
  return next;
}

void LongQueryDemoter::Loop() {
  for (;;) {
    std::vector<int> retired;
    {
      MutexLock l(&lock_);
      for (;;) {
        if (stopping_) return;
        if (!retired_.empty()) {
          retired.swap(retired_);
          break;
        }
        const Clock::time_point next = DemoteDueLocked(Clock::now());
        if (next == Clock::time_point::max()) {
          waiting_idle_ = true;
          wake_.Wait(&lock_);
          waiting_idle_ = false;
        } else {
          wake_.WaitUntil(&lock_, next);
        }
      }
    }
    // This thread runs at the base priority; a thread it starts inherits it.
    for (int slot : retired) {
      respawn_(slot);
      replaced_total_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace qr
