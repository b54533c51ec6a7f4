#include "runtime/deadline-watchdog.h"

#include <pthread.h>

#include <algorithm>

#include "runtime/query-state.h"

namespace qr {

DeadlineWatchdog::DeadlineWatchdog() {
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "qr-deadlines");
}

DeadlineWatchdog::~DeadlineWatchdog() {
  {
    MutexLock l(&lock_);
    stopping_ = true;
  }
  wake_.NotifyOne();
  thread_.join();
}

void DeadlineWatchdog::Arm(QueryState* query, Clock::time_point deadline) {
  bool notify = false;
  {
    MutexLock l(&lock_);
    armed_.push_back(Entry{query, deadline});
    // The loop wakes at 'wake_at_' anyway and then sees this entry.
    if (deadline < wake_at_) {
      wake_at_ = deadline;
      notify = true;
    }
  }
  if (notify) wake_.NotifyOne();
}

void DeadlineWatchdog::Disarm(QueryState* query) {
  // 'wake_at_' stays: the loop wakes then for nothing, once, rather than Arm() waking it for
  // each of the next queries.
  MutexLock l(&lock_);
  auto it = std::find_if(armed_.begin(), armed_.end(),
                         [query](const Entry& e) { return e.query == query; });
  if (it == armed_.end()) return;
  *it = armed_.back();
  armed_.pop_back();
}

void DeadlineWatchdog::Loop() {
  MutexLock l(&lock_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    for (size_t i = 0; i < armed_.size();) {
      if (armed_[i].deadline <= now) {
        // Only sets SQLite's flag (and takes the query's leaf lock): fine under ours, which
        // is also what keeps the query alive here (Disarm() waits for it).
        armed_[i].query->InterruptStatement();
        fired_total_.fetch_add(1, std::memory_order_relaxed);
        armed_[i] = armed_.back();
        armed_.pop_back();
      } else {
        next = std::min(next, armed_[i].deadline);
        ++i;
      }
    }
    wake_at_ = next;
    if (next == Clock::time_point::max()) {
      wake_.Wait(&lock_);
    } else {
      wake_.WaitUntil(&lock_, next);
    }
  }
}

}  // namespace qr
