#include "runtime/long-query-gate.h"

#include <algorithm>

#include "runtime/query-state.h"

namespace qr {

LongQueryGate::LongQueryGate(int per_user) : per_user_(per_user) {}

bool LongQueryGate::Enter(QueryState* query, Clock::time_point deadline) {
  if (!enabled()) return false;
  const std::string& user = query->query_ctx().user;
  {
    MutexLock l(&lock_);
    User& u = users_[user];
    if (u.running < per_user_ && u.parked.empty()) {
      ++u.running;
      return true;
    }
  }
  // About to park: from here a cancel must find this query (QueryState's lock, then ours).
  query->SetParkedIn(this);
  bool granted = false;
  {
    MutexLock l(&lock_);
    // 'u' stays valid: an entry is erased only with no query running or parked.
    User& u = users_[user];
    if (u.running < per_user_ && u.parked.empty()) {
      ++u.running;
      granted = true;
    } else {
      Waiter waiter{query};
      u.parked.push_back(&waiter);
      parks_total_.fetch_add(1, std::memory_order_relaxed);
      parked_now_.fetch_add(1, std::memory_order_relaxed);
      // Cancel() sets the flag before it calls WakeParked(), which takes our lock: read under
      // it, the flag is either seen here or the notification comes after this wait began.
      while (!waiter.granted && !query->is_cancelled()) {
        if (deadline == Clock::time_point::max()) {
          waiter.cv.Wait(&lock_);
        } else if (!waiter.cv.WaitUntil(&lock_, deadline) && Clock::now() >= deadline) {
          break;
        }
      }
      parked_now_.fetch_sub(1, std::memory_order_relaxed);
      granted = waiter.granted;
      if (!granted) u.parked.erase(std::find(u.parked.begin(), u.parked.end(), &waiter));
    }
  }
  query->SetParkedIn(nullptr);
  return granted;
}

void LongQueryGate::Leave(const QueryState* query) {
  MutexLock l(&lock_);
  auto it = users_.find(query->query_ctx().user);
  if (it == users_.end()) return;  // never entered: a caller's bug, nothing to give back
  User& u = it->second;
  if (!u.parked.empty()) {
    // The turn passes on: 'running' stays.
    Waiter* next = u.parked.front();
    u.parked.pop_front();
    next->granted = true;
    next->cv.NotifyOne();
  } else if (--u.running <= 0) {
    users_.erase(it);
  }
}

void LongQueryGate::WakeParked(const QueryState* query) {
  MutexLock l(&lock_);
  auto it = users_.find(query->query_ctx().user);
  if (it == users_.end()) return;
  for (Waiter* w : it->second.parked) {
    if (w->query == query) w->cv.NotifyOne();
  }
}

}  // namespace qr
