#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/mutex.h"
#include "util/password-file.h"
#include "util/thread-annotations.h"
#include "util/webserver.h"

namespace qr {

/// HTTP Basic authentication against a PasswordFile, for the webserver's authenticate hook.
///
/// Verifying a password runs PBKDF2 (deliberately slow: tens of milliseconds), so successful
/// verifications are cached: the key is a SHA-256 of a per-process random key and the exact
/// "user:password" sent (the password itself is never stored), the cache holds at most
/// 'cache_capacity' entries (the oldest is evicted first). A keep-alive client therefore pays
/// one SHA-256 and one hash lookup per request. Unknown users cost a PBKDF2 too (against a
/// dummy entry), so timing does not tell which users exist.
///
/// Failed attempts are logged (user name quoted and truncated, remote address; never the
/// password) and counted per remote IP address: after 'max_failures' within 'failure_window'
/// every request from that address that carries credentials gets 429 with Retry-After,
/// without any verification, until the window ends. At most 'max_tracked_addresses'
/// addresses are tracked (expired windows are dropped first; if all are live the table is
/// cleared, logged).
/// Thread-safety: all methods are thread-safe. PBKDF2 runs with no lock held.
/// Lock order: 'cache_lock_' and 'limiter_lock_' are leaves, never held together.
class BasicAuthenticator {
 public:
  struct Options {
    int max_failures = 10;
    std::chrono::seconds failure_window{60};
    size_t max_tracked_addresses = 10000;
    size_t cache_capacity = 1024;
  };

  BasicAuthenticator(PasswordFile file, Options options);

  enum class Result { kOk, kMissing, kMalformed, kUnknownUser, kWrongPassword, kRateLimited };
  /// Checks an Authorization header value sent from 'remote_address' ("ip:port"). On kOk,
  /// '*user' is the authenticated user.
  Result Authenticate(std::string_view authorization, std::string_view remote_address,
                      std::string* user);

  /// The webserver hook: sets req.authenticated_user and returns true, or returns false with
  /// the 401 (with WWW-Authenticate: Basic realm="coordinatord") or 429 answer in '*denied'.
  bool Check(HttpRequest& req, HttpResponse* denied);

  /// Replaces the users (e.g. after the file changed) and empties the cache.
  void Reload(PasswordFile file);

  /// Counters, for tests and metrics.
  uint64_t verifications() const { return verifications_.load(std::memory_order_relaxed); }
  uint64_t cache_hits() const { return cache_hits_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  uint64_t rate_limited() const { return rate_limited_.load(std::memory_order_relaxed); }
  /// Addresses with failures currently tracked (at most Options::max_tracked_addresses).
  size_t tracked_addresses();
  /// Credentials currently cached (at most Options::cache_capacity).
  size_t cached_credentials();

 private:
  struct AddressFailures {
    int failures = 0;
    std::chrono::steady_clock::time_point window_start;
  };

  std::string CacheKey(std::string_view credentials) const;
  bool CacheLookup(const std::string& key, std::string* user);
  void CacheInsert(const std::string& key, const std::string& user);
  /// Seconds until 'address' may try again; 0 when it is not limited.
  int64_t LimitedForSeconds(const std::string& address);
  void RecordFailure(const std::string& address, std::string_view user, Result why);
  void PruneLocked(std::chrono::steady_clock::time_point now) REQUIRES(limiter_lock_);
  /// Verifies against the current file (PBKDF2, no lock held).
  Result Verify(std::string_view user, std::string_view password);

  const Options options_;
  /// Random, per process: cache keys are useless outside it.
  std::array<unsigned char, 32> cache_key_secret_{};
  /// Verified against when the user is unknown, so that it costs the same.
  PasswordEntry dummy_entry_;

  /// Protects the users, the cache and its eviction order.
  Mutex cache_lock_;
  std::shared_ptr<const PasswordFile> file_ GUARDED_BY(cache_lock_);
  std::unordered_map<std::string, std::string> cache_ GUARDED_BY(cache_lock_);
  std::deque<std::string> cache_order_ GUARDED_BY(cache_lock_);

  /// Protects the failure counts.
  Mutex limiter_lock_;
  std::unordered_map<std::string, AddressFailures> failures_by_address_
      GUARDED_BY(limiter_lock_);

  // Statistics only: relaxed.
  std::atomic<uint64_t> verifications_{0}, cache_hits_{0}, failures_{0}, rate_limited_{0};
};

/// The IP address part of "ip:port" or "[v6]:port".
std::string_view RemoteIp(std::string_view remote_address);

}  // namespace qr
