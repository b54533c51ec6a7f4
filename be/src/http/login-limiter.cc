#include "http/login-limiter.h"

#include <algorithm>
#include <iterator>

#include <glog/logging.h>

#include "http/client-address.h"

namespace qr {
namespace {

constexpr size_t kMaxUserBytesInKey = 256;

}  // namespace

std::string LoginLimiter::Key(std::string_view user, std::string_view client_ip) {
  // The address key holds no space, so the pair is unambiguous.
  return AddressKey(client_ip) + " " + std::string(user.substr(0, kMaxUserBytesInKey));
}

void LoginLimiter::ExpireLocked(Pair* p, TimePoint now) {
  if (p->failures > 0 && p->window_start + options_.failure_window <= now) p->failures = 0;
}

void LoginLimiter::EraseIfIdleLocked(Table::iterator it) {
  if (it->second.failures == 0 && it->second.in_flight == 0) pairs_.erase(it);
}

LoginLimiter::Table::iterator LoginLimiter::FindOrInsertLocked(const std::string& key,
                                                               TimePoint now) {
  auto it = pairs_.find(key);
  if (it != pairs_.end()) {
    ExpireLocked(&it->second, now);
    return it;
  }
  if (pairs_.size() >= options_.max_tracked) {
    for (auto i = pairs_.begin(); i != pairs_.end();) {
      ExpireLocked(&i->second, now);
      i = i->second.failures == 0 && i->second.in_flight == 0 ? pairs_.erase(i) : std::next(i);
    }
  }
  if (pairs_.size() >= options_.max_tracked) {
    LOG(WARNING) << "Failed logins of " << pairs_.size()
                 << " (user, address) pairs in one window; forgetting them all";
    std::erase_if(pairs_, [](const auto& entry) { return entry.second.in_flight == 0; });
  }
  return pairs_.emplace(key, Pair{}).first;
}

int LoginLimiter::AddFailureLocked(Pair* p, TimePoint now) {
  if (p->failures == 0) p->window_start = now;
  return ++p->failures;
}

int64_t LoginLimiter::LimitedForSeconds(const std::string& key) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock l(&lock_);
  auto it = pairs_.find(key);
  if (it == pairs_.end()) return 0;
  ExpireLocked(&it->second, now);
  if (it->second.failures < options_.max_failures) {
    EraseIfIdleLocked(it);
    return 0;
  }
  auto left = it->second.window_start + options_.failure_window - now;
  return std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(left).count());
}

bool LoginLimiter::BeginVerification(const std::string& key) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock l(&lock_);
  auto it = FindOrInsertLocked(key, now);
  if (it->second.failures + it->second.in_flight >= options_.max_failures) {
    EraseIfIdleLocked(it);
    return false;
  }
  ++it->second.in_flight;
  return true;
}

int LoginLimiter::EndVerification(const std::string& key, bool failed) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock l(&lock_);
  auto it = pairs_.find(key);
  if (it == pairs_.end()) {
    // Not reached: a pair with a verification in flight is never dropped.
    if (!failed) return 0;
    it = FindOrInsertLocked(key, now);
  } else {
    ExpireLocked(&it->second, now);
    if (it->second.in_flight > 0) --it->second.in_flight;
  }
  const int failures = failed ? AddFailureLocked(&it->second, now) : it->second.failures;
  EraseIfIdleLocked(it);
  return failures;
}

int LoginLimiter::RecordFailure(const std::string& key) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock l(&lock_);
  return AddFailureLocked(&FindOrInsertLocked(key, now)->second, now);
}

size_t LoginLimiter::tracked() {
  MutexLock l(&lock_);
  return pairs_.size();
}

}  // namespace qr
