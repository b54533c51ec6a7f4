#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/byte-budget.h"
#include "util/mutex.h"
#include "util/status.h"
#include "util/thread-annotations.h"

/// Quotas on the disk space SQLite's temporary files use.
///
/// A query that sorts or groups more than fits in its page cache makes SQLite write temporary
/// files (sorter runs, ephemeral GROUP BY / DISTINCT tables, temp journals). Nothing bounds
/// them: an ORDER BY over a big cross join fills the disk. InstallSpillAccountingVfs() puts a
/// VFS in front of SQLite's default one that charges every byte a temporary file grows by to
/// the query running on the thread (QuerySpillScope, a per-query limit) and to the process
/// (SpillBudget, a total limit). Growth that either limit refuses fails the write with
/// SQLITE_FULL, which fails the statement; the scope then says which limit refused.
///
/// Call sequence in the daemon:
///   1. RemoveStaleSpillFiles(dir) (files a crashed earlier process left behind);
///   2. InstallSpillAccountingVfs(&budget, dir), before any connection is opened;
///   3. on the executor thread, around preparing, stepping and finalizing one query:
///        QuerySpillScope scope(&budget, per_query_limit);
///        ... if a step fails with SQLITE_FULL, scope.refusal() says which limit refused.

namespace qr {

/// The process-wide quota on the bytes SQLite's temporary files hold.
/// Thread-safety: all methods are thread-safe and lock-free.
/// Ownership: must outlive every QuerySpillScope and temporary file that charges it; the
/// installed budget must live until the process exits.
class SpillBudget : public ByteBudget {
 public:
  /// QR_REQUIRES: 'total_limit_bytes' > 0.
  explicit SpillBudget(int64_t total_limit_bytes) : ByteBudget(total_limit_bytes) {}

  /// Reservations a query's own limit refused (counted here for /metrics; refusals() counts
  /// those of this budget's total limit).
  int64_t query_refusals() const { return query_refusals_.load(std::memory_order_relaxed); }
  /// Counts a refusal by a query's own limit; called by the query's account.
  void CountQueryRefusal() { query_refusals_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> query_refusals_{0};
};

/// Which limit refused a temporary file's growth.
enum class SpillLimit { kQuery, kTotal };

/// What QuerySpillScope::refusal() reports: enough to say what was exceeded and by how much.
struct SpillRefusal {
  SpillLimit limit;
  /// The refusing limit.
  int64_t limit_bytes;
  /// The growth that was refused.
  int64_t requested_bytes;
  /// What the refusing account (the query, or the whole process) held at that moment.
  int64_t used_bytes;
};

/// Human-readable "query spill limit of N bytes exceeded ..." for an error message.
std::string SpillRefusalToString(const SpillRefusal& refusal);

/// The charge of one query's spill: its own limit in front of a SpillBudget. Shared by the
/// query's scope, its open temporary files and its result spool, so that a file closed after
/// the scope ended still returns its bytes to the right place.
/// Thread-safety: all methods are thread-safe.
class SpillAccount {
 public:
  /// 'budget' must outlive the account.
  SpillAccount(SpillBudget* budget, int64_t limit_bytes)
      : budget_(budget), limit_bytes_(limit_bytes) {}

  /// Reserves 'bytes' from the query's limit, then from the budget; on refusal returns false
  /// and, with 'record_refusal', remembers which limit refused (the first refusal only) and
  /// counts it. A result spool that waits instead of failing does not record its refusals.
  bool TryReserve(int64_t bytes, bool record_refusal = true);
  void Release(int64_t bytes);

  int64_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_bytes_.load(std::memory_order_relaxed); }
  int64_t limit_bytes() const { return limit_bytes_; }
  SpillBudget* budget() const { return budget_; }
  std::optional<SpillRefusal> refusal() const;

 private:
  void RecordRefusal(const SpillRefusal& refusal);

  SpillBudget* const budget_;
  const int64_t limit_bytes_;
  // Relaxed, as in SpillBudget: plain counters.
  std::atomic<int64_t> used_bytes_{0};
  std::atomic<int64_t> peak_bytes_{0};
  /// Protects 'refusal_'. A leaf lock.
  mutable Mutex mu_;
  std::optional<SpillRefusal> refusal_ QR_GUARDED_BY(mu_);
};

/// The spill accounting context of one query, made current on the constructing thread.
///
/// Temporary files SQLite opens on this thread while the scope is the thread's current one
/// are charged to it (its own limit first, then the SpillBudget) for their whole life, even
/// if they are closed after the scope ended (the charge lives in a shared account that the
/// files keep alive). Temporary files opened while no scope is current are charged to the
/// installed SpillBudget only (so are files opened by SQLite's sorter worker threads, which
/// PRAGMA threads=N would start; the daemon's authorizer refuses that PRAGMA). A file is
/// charged to the scope current when it was opened, whichever thread writes it later (a
/// connection's TEMP schema file, which lives until the connection closes, stays charged to
/// the query that first needed it; the daemon's read-only connections create none).
/// Thread-safety: construct and destroy on the same thread (the scope is thread-local); the
/// accessors may be called from any thread.
/// Ownership: does not own 'budget', which must outlive the scope and its files.
class QuerySpillScope {
 public:
  /// QR_REQUIRES: 'budget' != nullptr, 'query_limit_bytes' > 0.
  QuerySpillScope(SpillBudget* budget, int64_t query_limit_bytes);
  /// A scope charging an existing account (shared with the query's result spool).
  explicit QuerySpillScope(std::shared_ptr<SpillAccount> account);
  /// Restores the thread's previous scope (scopes nest, innermost wins).
  ~QuerySpillScope();
  QuerySpillScope(const QuerySpillScope&) = delete;
  QuerySpillScope& operator=(const QuerySpillScope&) = delete;

  /// Bytes this query's temporary files hold now, and at most so far.
  int64_t used_bytes() const;
  int64_t peak_bytes() const;
  int64_t limit_bytes() const;
  const std::shared_ptr<SpillAccount>& account() const { return account_; }
  /// The first refused reservation of this query, if any.
  std::optional<SpillRefusal> refusal() const;

  /// The scope current on the calling thread, or nullptr.
  static QuerySpillScope* Current();

 private:
  friend class SpillAccountingVfs;
  /// The account of the calling thread's current scope, or nullptr.
  static std::shared_ptr<SpillAccount> CurrentAccount();

  std::shared_ptr<SpillAccount> account_;
  QuerySpillScope* const previous_;
};

/// Registers, as SQLite's default VFS, a VFS that forwards everything to the previous default
/// one and accounts the growth of temporary files as described above, and makes SQLite
/// create its temporary files in 'temp_dir' (created if missing). Temporary files are those
/// opened without a name or with SQLITE_OPEN_TEMP_DB, TEMP_JOURNAL, TRANSIENT_DB, SUBJOURNAL
/// or DELETEONCLOSE; all other files get the default VFS's own methods, untouched.
/// Memory-mapped I/O is off for temporary files (it would bypass the accounting).
/// QR_REQUIRES: called once per process, before any SQLite connection is opened and while no
/// other thread uses SQLite; 'budget' lives until the process exits.
Status InstallSpillAccountingVfs(SpillBudget* budget, const std::string& temp_dir);

/// The name under which InstallSpillAccountingVfs() registers the VFS.
extern const char kSpillAccountingVfsName[];

/// Removes the regular files in 'dir' named etilqs_* (SQLite's temporary files) or qr-spill-*
/// (ours) that a crashed earlier process left behind, and sets '*removed' to their number.
/// Never follows or removes symlinks, and removes nothing else. A missing 'dir' is OK (0).
/// QR_REQUIRES: no live process uses 'dir' for its temporary files (they are unlinked right
/// after creation, so a live file is only named for an instant).
Status RemoveStaleSpillFiles(const std::string& dir, int64_t* removed);

}  // namespace qr
