#include "service/failure-throttle.h"

#include <algorithm>

namespace qr {

double FailureThrottle::TokensAt(const Bucket& b, Clock::time_point now) const {
  const double elapsed_s = std::chrono::duration<double>(now - b.updated).count();
  return std::min(capacity_, b.tokens + std::max(0.0, elapsed_s) * rate_per_s_);
}

void FailureThrottle::OnFailure(const std::string& user, Clock::time_point now) {
  if (!enabled()) return;
  MutexLock l(&lock_);
  auto [it, inserted] = buckets_.try_emplace(user);
  Bucket& b = it->second;
  // A new bucket starts full. A failure of a query admitted before the bucket emptied still
  // counts, down to one second's worth of debt: the user's wait is bounded.
  const double tokens = inserted ? capacity_ : TokensAt(b, now);
  b.tokens = std::max(-capacity_, tokens - 1);
  b.updated = now;
  if (inserted && buckets_.size() >= sweep_at_) SweepLocked(now);
}

bool FailureThrottle::Throttled(const std::string& user, Clock::time_point now) const {
  if (!enabled()) return false;
  MutexLock l(&lock_);
  auto it = buckets_.find(user);
  return it != buckets_.end() && TokensAt(it->second, now) < 1;
}

int64_t FailureThrottle::num_users_tracked() const {
  MutexLock l(&lock_);
  const Clock::time_point now = Clock::now();
  int64_t n = 0;
  for (const auto& [user, b] : buckets_) n += TokensAt(b, now) < capacity_ ? 1 : 0;
  return n;
}

void FailureThrottle::SweepLocked(Clock::time_point now) {
  std::erase_if(buckets_, [&](const auto& entry) {
    return TokensAt(entry.second, now) >= capacity_;
  });
  sweep_at_ = std::max<size_t>(64, 2 * buckets_.size());
}

}  // namespace qr
