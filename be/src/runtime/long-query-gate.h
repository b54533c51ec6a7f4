#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "util/mutex.h"

namespace qr {

class QueryState;

/// Lets at most 'per_user' long queries of one user run at once; a further one parks (its
/// executor thread waits, using no CPU) until one of them ends. "Long" is the demoter's
/// threshold (--long_query_after_ms): the executor calls Enter() from the query runner's
/// checks once its query has run that long, so short queries never come here.
///
/// Why: demoted (nice 19) executors weigh little, but a dozen runnable ones still take more
/// CPU from short queries than two do. Side by side, beside 64 clients of one user running
/// sorts or `instr` bombs, other users' `SELECT 1` p99 was 17% and 10% lower with the gate
/// (docs/benchmarks.md, "A user's long queries take turns"). Parked queries keep their running
/// slot, executor and connection; a user's short queries do not wait for them.
///
/// Turns are handed over first come, first served within a user. A parked query returns from
/// Enter() on a cancel (QueryState::Cancel() calls WakeParked()), at its deadline, or with a
/// turn.
/// Thread-safety: all methods are thread-safe. Lock order: a QueryState's lock before the
/// gate's (Cancel() calls WakeParked() under its lock).
class LongQueryGate {
 public:
  using Clock = std::chrono::steady_clock;

  /// 'per_user' <= 0: Enter() never parks (and counts nothing).
  explicit LongQueryGate(int per_user);
  LongQueryGate(const LongQueryGate&) = delete;
  LongQueryGate& operator=(const LongQueryGate&) = delete;

  bool enabled() const { return per_user_ > 0; }
  int per_user() const { return per_user_; }

  /// The executor of 'query' asks for a turn. Returns true holding one (the caller must
  /// Leave() when the query's statement ends), false without one when the query was canceled
  /// or 'deadline' passed while it waited. Must not be called with a lock of SQLite held.
  bool Enter(QueryState* query, Clock::time_point deadline);
  /// Gives back the turn of 'query' (Enter() returned true): to the first parked query of the
  /// same user, if any.
  void Leave(const QueryState* query);
  /// Wakes 'query' if it is parked here (its cancel). Called by QueryState::Cancel().
  void WakeParked(const QueryState* query);

  /// Queries that parked so far; queries parked now.
  int64_t num_parks() const { return parks_total_.load(std::memory_order_relaxed); }
  int64_t num_parked() const { return parked_now_.load(std::memory_order_relaxed); }

 private:
  struct Waiter {
    explicit Waiter(const QueryState* q) : query(q) {}
    const QueryState* const query;
    CondVar cv;
    bool granted = false;
  };
  struct User {
    int running = 0;
    std::deque<Waiter*> parked;
  };

  const int per_user_;
  Mutex lock_;
  std::unordered_map<std::string, User> users_ QR_GUARDED_BY(lock_);
  std::atomic<int64_t> parks_total_{0};
  std::atomic<int64_t> parked_now_{0};
};

}  // namespace qr
