#include "http/http-auth.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

namespace qr {
namespace {

constexpr char kRealmHeader[] = "Basic realm=\"coordinatord\"";
constexpr std::chrono::seconds kQueueFullLogInterval{10};

const char* Describe(BasicAuthenticator::Result r) {
  switch (r) {
    case BasicAuthenticator::Result::kMalformed: return "malformed Basic credentials";
    case BasicAuthenticator::Result::kUnknownUser: return "unknown user";
    case BasicAuthenticator::Result::kWrongPassword: return "wrong password";
    default: return "failed";
  }
}

HttpResponse Unauthorized(std::string text) {
  HttpResponse r = HttpResponse::Text(401, std::move(text));
  r.headers.emplace_back("WWW-Authenticate", kRealmHeader);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

HttpResponse Unavailable(std::string text) {
  HttpResponse r = HttpResponse::Text(503, std::move(text));
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace

std::string_view RemoteIp(std::string_view remote_address) {
  if (!remote_address.empty() && remote_address.front() == '[') {
    size_t close = remote_address.find(']');
    return close == std::string_view::npos ? remote_address : remote_address.substr(1, close - 1);
  }
  return remote_address.substr(0, remote_address.rfind(':'));
}

BasicAuthenticator::Users::Users(PasswordFile f, uint64_t g)
    : file(std::move(f)),
      dummy{"", file.TypicalIterations(), std::string(kPasswordSaltBytes, 'x'),
            std::string(kPasswordHashBytes, '\0')},
      generation(g) {}

BasicAuthenticator::BasicAuthenticator(PasswordFile file, Options options)
    : options_(std::move(options)),
      users_(std::make_shared<const Users>(std::move(file), 0)),
      limiter_(LoginLimiter::Options{options_.max_failures, options_.failure_window,
                                     options_.max_tracked_addresses}) {
  CHECK_EQ(RAND_bytes(cache_key_secret_.data(), static_cast<int>(cache_key_secret_.size())), 1)
      << "no randomness for the credential cache key";
  CHECK_GE(options_.verify_threads, 1);
  CHECK_GE(options_.max_pending_verifications, 1u);
  MutexLock l(&queue_lock_);
  for (int i = 0; i < options_.verify_threads; ++i) {
    verifiers_.emplace_back([this] { RunVerifier(); });
  }
}

BasicAuthenticator::~BasicAuthenticator() { Stop(); }

void BasicAuthenticator::Stop() {
  std::deque<Verification> dropped;
  std::vector<std::thread> threads;
  {
    MutexLock l(&queue_lock_);
    stopping_ = true;
    dropped.swap(queue_);
    slots_used_ -= dropped.size();
    threads.swap(verifiers_);
  }
  queue_cv_.NotifyAll();
  for (Verification& v : dropped) {
    Abandon(v);
    v.done(false, "", Unavailable("The server is shutting down\n"));
  }
  for (std::thread& t : threads) t.join();
}

void BasicAuthenticator::RunVerifier() {
  for (;;) {
    Verification v;
    {
      MutexLock l(&queue_lock_);
      while (queue_.empty() && !stopping_) queue_cv_.Wait(&queue_lock_);
      if (queue_.empty()) return;  // Stopping.
      v = std::move(queue_.front());
      queue_.pop_front();
    }
    if (options_.before_verify) options_.before_verify();
    std::string user;
    Result r = Finish(v, &user);
    {
      // Free the slot before answering: the client may send its next request at once.
      MutexLock l(&queue_lock_);
      --slots_used_;
    }
    if (r == Result::kOk) {
      v.done(true, std::move(user), HttpResponse());
    } else {
      v.done(false, "", Denial(r, v.limit_key));
    }
  }
}

bool BasicAuthenticator::ReserveSlot() {
  MutexLock l(&queue_lock_);
  if (slots_used_ >= options_.max_pending_verifications) return false;
  ++slots_used_;
  return true;
}

void BasicAuthenticator::Enqueue(Verification v) {
  {
    MutexLock l(&queue_lock_);
    if (!stopping_) {
      queue_.push_back(std::move(v));
      queue_cv_.NotifyOne();
      return;
    }
    --slots_used_;
  }
  Abandon(v);
  v.done(false, "", Unavailable("The server is shutting down\n"));
}

size_t BasicAuthenticator::pending_verifications() {
  MutexLock l(&queue_lock_);
  return slots_used_;
}

HttpResponse BasicAuthenticator::QueueFull() {
  const uint64_t n = verify_queue_full_.fetch_add(1, std::memory_order_relaxed) + 1;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = last_queue_full_log_ns_.load(std::memory_order_relaxed);
  if (now - last >= std::chrono::nanoseconds(kQueueFullLogInterval).count() &&
      last_queue_full_log_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    LOG(WARNING) << "Password verification queue full (" << options_.max_pending_verifications
                 << " pending): answering 503 to new logins (" << n
                 << " so far; see --auth_verify_threads, --auth_max_pending_verifications)";
  }
  return Unavailable("Too many logins are being verified; try again shortly\n");
}

std::string BasicAuthenticator::CacheKey(std::string_view credentials) const {
  std::string key(32, '\0');
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  CHECK(ctx != nullptr);
  bool ok = EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, cache_key_secret_.data(), cache_key_secret_.size()) == 1 &&
            EVP_DigestUpdate(ctx, credentials.data(), credentials.size()) == 1 &&
            EVP_DigestFinal_ex(ctx, reinterpret_cast<unsigned char*>(key.data()), &len) == 1;
  EVP_MD_CTX_free(ctx);
  CHECK(ok && len == key.size()) << "SHA-256 failed";
  return key;
}

bool BasicAuthenticator::CacheLookup(const std::string& key, std::string* user,
                                     std::shared_ptr<const Users>* users) {
  MutexLock l(&cache_lock_);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    *users = users_;  // What the verification of this miss checks against.
    return false;
  }
  *user = it->second;
  return true;
}

void BasicAuthenticator::CacheInsert(const std::string& key, const std::string& user,
                                     uint64_t generation) {
  MutexLock l(&cache_lock_);
  // Verified against a file that Reload() has replaced meanwhile: the user may be gone or
  // have a new password, so the success counts for this one request only.
  if (generation != users_->generation) return;
  if (!cache_.emplace(key, user).second) return;
  cache_order_.push_back(key);
  while (cache_order_.size() > options_.cache_capacity) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
}

void BasicAuthenticator::Reload(PasswordFile file) {
  MutexLock l(&cache_lock_);
  users_ = std::make_shared<const Users>(std::move(file), users_->generation + 1);
  cache_.clear();
  cache_order_.clear();
}

BasicAuthenticator::Result BasicAuthenticator::Verify(const Users& users, std::string_view user,
                                                      std::string_view password) {
  verifications_.fetch_add(1, std::memory_order_relaxed);
  const PasswordEntry* entry = users.file.Find(user);
  if (entry == nullptr) {
    (void)VerifyPassword(users.dummy, password);  // The same cost as a typical known user.
    return Result::kUnknownUser;
  }
  return VerifyPassword(*entry, password) ? Result::kOk : Result::kWrongPassword;
}

void BasicAuthenticator::LogFailure(const std::string& address, std::string_view user,
                                    Result why, int failures) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  // The password is never logged; the user name is quoted and cut (it may be a mistyped
  // password).
  LOG(WARNING) << "Authentication failed for user " << QuoteForError(user, 32) << " from "
               << address << ": " << Describe(why);
  if (failures == options_.max_failures) {
    LOG(WARNING) << "Too many failed logins for user " << QuoteForError(user, 32) << " from "
                 << address << " (" << failures << " in " << options_.failure_window.count()
                 << " s): its requests get 429 until the window ends";
  }
}

bool BasicAuthenticator::Decide(std::string_view authorization, const std::string& address,
                                Result* r, std::string* user, Verification* v) {
  if (authorization.empty()) {
    *r = Result::kMissing;
    return true;
  }
  const bool parsed = ParseBasicCredentials(authorization, &v->credentials);
  // Malformed credentials name no user: they count under the empty name.
  const std::string_view name = parsed ? v->credentials.user() : std::string_view();
  v->limit_key = LoginLimiter::Key(name, address);
  // A limited pair is refused before the cache is looked at: a cache hit would confirm a
  // guess without any cost.
  if (limiter_.LimitedForSeconds(v->limit_key) > 0) {
    rate_limited_.fetch_add(1, std::memory_order_relaxed);
    *r = Result::kRateLimited;
    return true;
  }
  if (!parsed) {
    LogFailure(address, "", Result::kMalformed, limiter_.RecordFailure(v->limit_key));
    *r = Result::kMalformed;
    return true;
  }
  v->key = CacheKey(v->credentials.decoded);
  if (CacheLookup(v->key, user, &v->users)) {
    cache_hits_.fetch_add(1, std::memory_order_relaxed);
    *r = Result::kOk;
    return true;
  }
  // Failures plus verifications in flight reach the limit: no more verifications.
  if (!limiter_.BeginVerification(v->limit_key)) {
    rate_limited_.fetch_add(1, std::memory_order_relaxed);
    *r = Result::kRateLimited;
    return true;
  }
  v->address = address;
  return false;
}

BasicAuthenticator::Result BasicAuthenticator::Finish(const Verification& v, std::string* user) {
  std::string_view name = v.credentials.user();
  Result r = Verify(*v.users, name, v.credentials.password());
  const int failures = limiter_.EndVerification(v.limit_key, r != Result::kOk);
  if (r != Result::kOk) {
    LogFailure(v.address, name, r, failures);
    return r;
  }
  *user = std::string(name);
  CacheInsert(v.key, *user, v.users->generation);
  return Result::kOk;
}

BasicAuthenticator::Result BasicAuthenticator::Authenticate(std::string_view authorization,
                                                            std::string_view remote_address,
                                                            std::string* user) {
  Result r = Result::kOk;
  Verification v;
  const std::string address(RemoteIp(remote_address));
  if (Decide(authorization, address, &r, user, &v)) return r;
  return Finish(v, user);
}

size_t BasicAuthenticator::cached_credentials() {
  MutexLock l(&cache_lock_);
  return cache_.size();
}

HttpResponse BasicAuthenticator::Denial(Result r, const std::string& limit_key) {
  if (r == Result::kMissing) {
    return Unauthorized("Authentication required: send HTTP Basic credentials\n");
  }
  if (r == Result::kRateLimited) {
    HttpResponse denied = HttpResponse::Text(
        429,
        "Too many failed authentication attempts for this user from this address; try again "
        "later\n");
    // Not limited yet but out of budget with verifications in flight: they end shortly.
    int64_t wait_s = limiter_.LimitedForSeconds(limit_key);
    denied.headers.emplace_back("Retry-After", std::to_string(std::max<int64_t>(1, wait_s)));
    return denied;
  }
  return Unauthorized("Invalid user name or password\n");
}

std::string BasicAuthenticator::ClientAddressOf(const HttpRequest& req) const {
  const std::string_view peer = RemoteIp(req.remote_address);
  if (options_.trusted_proxies.empty()) return std::string(peer);
  // Several X-Forwarded-For headers are one list, in order (RFC 9110, 5.3).
  std::string forwarded_for;
  auto [first, last] = req.headers.equal_range("X-Forwarded-For");
  for (auto it = first; it != last; ++it) {
    if (!forwarded_for.empty()) forwarded_for += ',';
    forwarded_for.append(it->value().data(), it->value().size());
  }
  return ClientIp(peer, forwarded_for, options_.trusted_proxies);
}

AuthVerdict BasicAuthenticator::Check(HttpRequest& req, HttpResponse* denied,
                                      const AuthDeferrer& defer) {
  Result r = Result::kOk;
  std::string user;
  Verification v;
  const std::string address = ClientAddressOf(req);
  if (Decide(req.Header("Authorization"), address, &r, &user, &v)) {
    if (r == Result::kOk) {
      req.authenticated_user = std::move(user);
      return AuthVerdict::kAllow;
    }
    *denied = Denial(r, v.limit_key);
    return AuthVerdict::kDeny;
  }
  if (!ReserveSlot()) {
    Abandon(v);
    *denied = QueueFull();
    return AuthVerdict::kDeny;
  }
  v.done = defer();
  Enqueue(std::move(v));
  return AuthVerdict::kDeferred;
}

}  // namespace qr
