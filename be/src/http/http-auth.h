#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/basic-credentials.h"
#include "http/client-address.h"
#include "http/login-limiter.h"
#include "util/mutex.h"
#include "http/password-file.h"
#include "util/thread-annotations.h"
#include "http/webserver.h"

namespace qr {

/// HTTP Basic authentication against a PasswordFile, for the webserver's authenticate hook.
///
/// Verifying a password runs PBKDF2 (deliberately slow: tens of milliseconds), so the
/// webserver hook Check() never runs it on the calling (I/O) thread: a cache miss is queued to
/// 'verify_threads' verification threads and answered through the webserver's AuthCallback.
/// At most 'max_pending_verifications' are queued or running; beyond that a request gets 503
/// with Retry-After at once (counted, logged at most every 10 s). Successful verifications
/// are cached: the key is a SHA-256 of a per-process random key and the exact
/// "user:password" sent (the password itself is never stored), the cache holds at most
/// 'cache_capacity' entries (the oldest is evicted first). A keep-alive client therefore pays
/// one SHA-256 and one hash lookup per request. Unknown users cost a PBKDF2 too (against a
/// dummy entry), so timing does not tell which users exist.
///
/// Failed attempts are logged (user name quoted and truncated, client address; never the
/// password) and counted per (user, client address) pair (LoginLimiter): after 'max_failures'
/// within 'failure_window' the pair's requests get 429 with Retry-After, without any
/// verification, until the window ends; even the right password, even credentials in the
/// cache (otherwise the cache would answer unlimited guesses at a cached password). Other
/// users from that address, and the same user from other addresses, are not affected.
/// Verifications in flight count against the same budget: a pair whose failures plus running
/// verifications reach 'max_failures' gets 429 for credentials not in the cache, so N
/// concurrent guesses cost at most 'max_failures' verifications. The client address is the
/// connection's peer or, when that is one of 'trusted_proxies', the last untrusted hop of
/// X-Forwarded-For (ClientIp()); it is keyed by AddressKey() (127.0.0.0/8 and ::1 as one,
/// IPv6 by /64). At most 'max_tracked_addresses' pairs are tracked (expired windows are
/// dropped first; if all are live the table is cleared, logged).
/// Thread-safety: all methods are thread-safe. PBKDF2 runs with no lock held.
/// Lifecycle: the verification threads start in the constructor and stop in Stop() (or the
/// destructor): queued verifications are then answered 503 unverified, running ones finish.
/// Lock order: 'cache_lock_', the limiter's lock and 'queue_lock_' are leaves, never held
/// together; no AuthCallback is called and no user code runs while any is held.
class BasicAuthenticator {
 public:
  struct Options {
    int max_failures = 10;
    std::chrono::seconds failure_window{60};
    /// (user, address) pairs tracked at most.
    size_t max_tracked_addresses = 10000;
    /// Connections from these may name the client in X-Forwarded-For.
    IpNetworks trusted_proxies;
    size_t cache_capacity = 1024;
    /// Threads running the password verifications of cache misses (at least 1).
    int verify_threads = 1;
    /// Cache misses queued or being verified at most; more get 503 (at least 1).
    size_t max_pending_verifications = 64;
    /// For tests: runs on a verification thread before each verification (e.g. to hold it).
    std::function<void()> before_verify;
  };

  BasicAuthenticator(PasswordFile file, Options options);
  ~BasicAuthenticator();  // Stop()s.
  BasicAuthenticator(const BasicAuthenticator&) = delete;
  BasicAuthenticator& operator=(const BasicAuthenticator&) = delete;

  enum class Result { kOk, kMissing, kMalformed, kUnknownUser, kWrongPassword, kRateLimited };
  /// Checks an Authorization header value sent from 'remote_address' ("ip:port", the client
  /// itself: no proxy is considered) on the calling thread (a cache miss runs PBKDF2 here). On kOk, '*user' is the authenticated user.
  Result Authenticate(std::string_view authorization, std::string_view remote_address,
                      std::string* user);

  /// The client address of 'req': its peer, or the client a trusted proxy names.
  std::string ClientAddressOf(const HttpRequest& req) const;

  /// The webserver's authenticate hook. Decides at once, without a thread hop, when it needs
  /// no PBKDF2: kAllow for cached credentials (setting req.authenticated_user); kDeny with
  /// the answer in '*denied' for missing or malformed credentials (401 with WWW-Authenticate:
  /// Basic realm="coordinatord"), a rate-limited (user, address) pair (429) or a full
  /// verification queue (503 with Retry-After: 1). Otherwise queues the verification, calls 'defer' and returns
  /// kDeferred: the callback gets the user, or the 401, from a verification thread.
  AuthVerdict Check(HttpRequest& req, HttpResponse* denied, const AuthDeferrer& defer);

  /// Stops and joins the verification threads; queued verifications are answered 503
  /// unverified, and Check() answers 503 to a cache miss from now on. Idempotent.
  void Stop();

  /// Replaces the users (e.g. after the file changed) and empties the cache.
  void Reload(PasswordFile file);

  /// Counters, for tests and metrics.
  uint64_t verifications() const { return verifications_.load(std::memory_order_relaxed); }
  uint64_t cache_hits() const { return cache_hits_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  uint64_t rate_limited() const { return rate_limited_.load(std::memory_order_relaxed); }
  /// Cache misses answered 503 because 'max_pending_verifications' were pending.
  uint64_t verify_queue_full() const {
    return verify_queue_full_.load(std::memory_order_relaxed);
  }
  /// Verifications queued or running now.
  size_t pending_verifications();
  /// (user, address) pairs with failures or verifications in flight tracked now (at most
  /// Options::max_tracked_addresses, plus the verifications in flight).
  size_t tracked_addresses() { return limiter_.tracked(); }
  /// Credentials currently cached (at most Options::cache_capacity).
  size_t cached_credentials();

 private:
  /// The users of one password file, and what an unknown user is checked against.
  struct Users {
    Users(PasswordFile f, uint64_t g);
    PasswordFile file;
    /// Verified against when the user is unknown: the file's typical iteration count, so
    /// that timing does not tell which users exist.
    PasswordEntry dummy;
    /// Which Reload() this is: a verification that ran against an older file is not cached.
    uint64_t generation;
  };

  /// A cache miss on its way to a verification thread.
  struct Verification {
    BasicCredentials credentials;
    std::string key;  // CacheKey(credentials.decoded)
    std::string address;  // The client IP, for the log.
    std::string limit_key;  // LoginLimiter::Key(user, address), holding a verification.
    /// The users as the request arrived: a Reload() meanwhile keeps it from being cached.
    std::shared_ptr<const Users> users;
    AuthCallback done;
  };

  /// The part of Authenticate() that needs no PBKDF2: true with '*r' (and '*user' on kOk)
  /// when decided, false with '*v' (but for 'done') filled when a verification is needed
  /// (it then holds a verification of the limiter: Finish() or Abandon() it).
  bool Decide(std::string_view authorization, const std::string& address, Result* r,
              std::string* user, Verification* v);
  /// Verifies 'v' (PBKDF2), then caches the success or records the failure.
  Result Finish(const Verification& v, std::string* user);
  /// Gives back the limiter's verification of 'v', which will not run.
  void Abandon(const Verification& v) { limiter_.EndVerification(v.limit_key, false); }
  /// The answer to a failed Authenticate() of the pair 'limit_key'.
  HttpResponse Denial(Result r, const std::string& limit_key);
  /// The 503 answer when the queue is full (counted, logged now and then).
  HttpResponse QueueFull();
  /// Takes one of the 'max_pending_verifications' slots; false when none is free.
  bool ReserveSlot();
  /// Queues 'v' (which holds a slot) or, when stopping, answers it 503.
  void Enqueue(Verification v);
  /// A verification thread's loop.
  void RunVerifier();
  std::string CacheKey(std::string_view credentials) const;
  /// True with the cached user; false with the current users in '*users'.
  bool CacheLookup(const std::string& key, std::string* user, std::shared_ptr<const Users>* users);
  /// Caches 'key' -> 'user' unless the users changed since 'generation' was verified against.
  void CacheInsert(const std::string& key, const std::string& user, uint64_t generation);
  /// Logs a failure of 'user' from 'address', the pair's 'failures'-th in its window.
  void LogFailure(const std::string& address, std::string_view user, Result why, int failures);
  /// Verifies against 'users' (PBKDF2, no lock held).
  Result Verify(const Users& users, std::string_view user, std::string_view password);

  const Options options_;
  /// Random, per process: cache keys are useless outside it.
  std::array<unsigned char, 32> cache_key_secret_{};

  /// Protects the users, the cache and its eviction order.
  Mutex cache_lock_;
  std::shared_ptr<const Users> users_ QR_GUARDED_BY(cache_lock_);
  std::unordered_map<std::string, std::string> cache_ QR_GUARDED_BY(cache_lock_);
  std::deque<std::string> cache_order_ QR_GUARDED_BY(cache_lock_);

  LoginLimiter limiter_;

  /// Protects the verification queue and the threads that serve it.
  Mutex queue_lock_;
  CondVar queue_cv_;  // Signaled when 'queue_' grows or 'stopping_' is set.
  std::deque<Verification> queue_ QR_GUARDED_BY(queue_lock_);
  /// Queued plus running verifications (each holds a slot until its callback is due).
  size_t slots_used_ QR_GUARDED_BY(queue_lock_) = 0;
  bool stopping_ QR_GUARDED_BY(queue_lock_) = false;
  std::vector<std::thread> verifiers_ QR_GUARDED_BY(queue_lock_);

  // Statistics only: relaxed.
  std::atomic<uint64_t> verifications_{0}, cache_hits_{0}, failures_{0}, rate_limited_{0},
      verify_queue_full_{0};
  /// When the last "queue full" warning was logged (steady clock, ns), so that a burst logs
  /// one line per 10 s. Relaxed: losing a race only logs one line more.
  std::atomic<int64_t> last_queue_full_log_ns_{0};
};

/// The IP address part of "ip:port" or "[v6]:port".
std::string_view RemoteIp(std::string_view remote_address);

}  // namespace qr
