#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr {

/// Counts failed logins per (user, client address) pair (see Key()) so that a pair with too
/// many can be refused without a password check, and counts the checks in flight against the
/// same budget: a pair with 'max_failures' failures plus verifications running gets no more
/// verifications, so N concurrent guesses cause at most 'max_failures' checks per window.
/// A pair's window starts at its first failure and lasts 'failure_window'; when it ends the
/// failures are forgotten. At most 'max_tracked' pairs are tracked: when a new one would
/// exceed it, pairs whose window ended are dropped, then (logged) every pair with no
/// verification in flight; the table may therefore exceed 'max_tracked' by the number of
/// verifications in flight, which the caller bounds.
/// Thread-safety: all methods are thread-safe.
/// Lock order: 'lock_' is a leaf.
class LoginLimiter {
 public:
  struct Options {
    int max_failures = 10;
    std::chrono::seconds failure_window{60};
    size_t max_tracked = 10000;
  };

  explicit LoginLimiter(Options options) : options_(options) {}

  /// The key of the pair ('user', 'client_ip'): the address part is AddressKey('client_ip')
  /// (loopback as one address, IPv6 by /64), the user name is cut at 256 bytes.
  static std::string Key(std::string_view user, std::string_view client_ip);

  /// Seconds until 'key' may try again; 0 when it is not limited (fewer than 'max_failures'
  /// failures in its window). In-flight verifications do not count here.
  int64_t LimitedForSeconds(const std::string& key);
  /// Reserves a verification for 'key': false when its failures plus the verifications in
  /// flight reach 'max_failures' (the caller answers 429). On true, call EndVerification()
  /// exactly once.
  bool BeginVerification(const std::string& key);
  /// Ends a verification BeginVerification() allowed; 'failed' counts a failure. Returns the
  /// pair's failures in its window.
  int EndVerification(const std::string& key, bool failed);
  /// Counts a failure that needed no verification (malformed credentials). Returns the
  /// pair's failures in its window.
  int RecordFailure(const std::string& key);

  /// Pairs tracked now.
  size_t tracked();

 private:
  struct Pair {
    int failures = 0;
    int in_flight = 0;
    std::chrono::steady_clock::time_point window_start;
  };
  using Table = std::unordered_map<std::string, Pair>;
  using TimePoint = std::chrono::steady_clock::time_point;

  /// Forgets the failures of 'p' when its window ended.
  void ExpireLocked(Pair* p, TimePoint now) QR_REQUIRES(lock_);
  /// The pair of 'key', inserted (making room) when missing.
  Table::iterator FindOrInsertLocked(const std::string& key, TimePoint now) QR_REQUIRES(lock_);
  /// Drops 'it' when it holds nothing (no failure, nothing in flight).
  void EraseIfIdleLocked(Table::iterator it) QR_REQUIRES(lock_);
  int AddFailureLocked(Pair* p, TimePoint now) QR_REQUIRES(lock_);

  const Options options_;
  /// Protects the table.
  Mutex lock_;
  Table pairs_ QR_GUARDED_BY(lock_);
};

}  // namespace qr
