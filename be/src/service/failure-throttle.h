#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr {

/// Per-user budget of failed queries: a token bucket per user that each failed query drains
/// by one and that refills at 'rate_per_s' up to one second's worth (at least 1). A user
/// whose bucket is empty is throttled: while other users have queries in flight (the caller
/// says), its submissions are answered late and refused (StatementService), so that a client
/// whose statements fail at once (a row too wide, a syntax error in a loop) cannot take the
/// HTTP threads from the other users with thousands of submissions per second. A user whose
/// queries succeed is never throttled, whatever its rate.
///
/// The map holds only users that failed recently: a bucket that has refilled is dropped at
/// the next sweep (when the map has doubled since the last one), so its size is bounded by
/// the users that failed within the last second or so.
/// Thread-safety: all methods are thread-safe.
class FailureThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  /// 'rate_per_s' <= 0 disables the throttle (Throttled() is always false).
  explicit FailureThrottle(double rate_per_s)
      : rate_per_s_(rate_per_s), capacity_(rate_per_s > 1 ? rate_per_s : 1) {}

  bool enabled() const { return rate_per_s_ > 0; }
  double rate_per_s() const { return rate_per_s_; }

  /// A query of 'user' failed at 'now'.
  void OnFailure(const std::string& user, Clock::time_point now = Clock::now());
  /// Whether 'user' has no failed query left in its budget at 'now'.
  bool Throttled(const std::string& user, Clock::time_point now = Clock::now()) const;

  /// A submission was refused because of this throttle.
  void CountRefused() { refused_total_.fetch_add(1, std::memory_order_relaxed); }
  int64_t num_refused() const { return refused_total_.load(std::memory_order_relaxed); }
  /// Users whose bucket is not full (failed within about the last second).
  int64_t num_users_tracked() const;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point updated{};
  };
  /// 'b' refilled up to 'now'.
  double TokensAt(const Bucket& b, Clock::time_point now) const;
  void SweepLocked(Clock::time_point now) QR_REQUIRES(lock_);

  const double rate_per_s_;
  const double capacity_;
  mutable Mutex lock_;
  std::unordered_map<std::string, Bucket> buckets_ QR_GUARDED_BY(lock_);
  /// Sweep when the map reaches this size.
  size_t sweep_at_ QR_GUARDED_BY(lock_) = 64;
  std::atomic<int64_t> refused_total_{0};
};

}  // namespace qr
