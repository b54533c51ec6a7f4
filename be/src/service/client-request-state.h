#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/query-error.h"
#include "runtime/query-exec-mgr.h"
#include "runtime/result-buffer.h"
#include "service/session-statements.h"
#include "util/mutex.h"
#include "util/sharded-query-map-util.h"
#include "util/stable-ref-registry.h"
#include "util/thread-annotations.h"
#include "util/unique-id.h"

namespace qr {

/// Who submitted a query and how (from the protocol headers).
struct SessionInfo {
  /// The effective user (whose query it is).
  std::string user;
  /// With authentication: who authenticated (an admin may submit as another 'user'); empty
  /// without. For the audit lines of the log.
  std::string principal;
  /// May read every user's rows of system.runtime.queries (no authentication, or an admin).
  bool sees_all_queries = true;
  /// The client's address ("ip:port"), for the audit lines of the log.
  std::string client_address;
  std::string source;
  std::string catalog;
  std::string schema;
  std::string client_info;
  /// X-*-Client-Tags, split at commas, trimmed, empty ones dropped.
  std::vector<std::string> client_tags;
  /// X-*-Session properties as sent, "k=v" pairs.
  std::vector<std::pair<std::string, std::string>> properties;
  /// X-*-Prepared-Statement: the session's prepared statements, name and SQL (decoded).
  std::vector<std::pair<std::string, std::string>> prepared_statements;
  /// What a PREPARE may still add (the server's limits, less what the submission's headers
  /// take): the client sends every prepared statement of its session with each request, so
  /// one beyond --max_session_properties, or past --max_header_bytes, would make every later
  /// request fail (400, 431), the DEALLOCATE that would undo it included.
  size_t max_prepared_statements = SIZE_MAX;
  /// Bytes of --max_header_bytes the submission's header block left unused.
  size_t header_bytes_left = SIZE_MAX;
  /// The submission used the X-Presto-* headers (UsesPrestoHeaders()): the query's answers
  /// name the headers of a session statement X-Presto-* instead of X-Trino-*.
  bool presto_headers = false;
};

/// What one GET of a query's nextUri answers: the coordinator core's view of a protocol page.
/// Rendered to JSON by the HTTP layer; 'page' is shared with the cache, never copied.
struct QueryPage {
  /// The protocol state ("QUEUED", "RUNNING", "FINISHED", "FAILED").
  const char* state = "QUEUED";
  /// Columns, once known.
  std::shared_ptr<const std::vector<Column>> columns;
  /// Rows of this page, if any.
  std::optional<ResultPage> page;
  /// The token of the next GET; nullopt on the final answer.
  std::optional<int64_t> next_token;
  /// True while the query waits for admission or an executor ("queued" in nextUri).
  bool queued = true;
  std::optional<QueryError> error;
};

/// Coordinator-side state of one client request: identity, statement, lifecycle, the result
/// cursor that hands pages to the client, and parked long-poll waiters.
///
/// Lifecycle: QUEUED -> RUNNING -> FINISHED | FAILED | CANCELED. The query is FINISHED for the
/// client once every row has been handed out (the executor may have finished earlier).
/// Thread-safety: all methods are thread-safe.
/// Lock order: QueryCoordinator's (query-coordinator.h): 'lock_' is taken under a PendingFetch
/// lock or 'admission_lock_', and only the result buffer's lock is taken under it; a registry
/// shard lock is a leaf, never held when 'lock_' is taken. Waiter callbacks run after 'lock_'
/// is released.
class ClientRequestState {
 public:
  enum class State { kQueued, kRunning, kFinished, kFailed, kCanceled };
  static const char* StateName(State s);
  static bool IsTerminal(State s) { return s >= State::kFinished; }

  ClientRequestState(const UniqueId& id, std::shared_ptr<const std::string> statement,
                     SessionInfo session, StatementPlan plan = {});

  /// How a request of an earlier run ended, as the query history recorded it.
  struct Restored {
    State state = State::kFinished;
    std::optional<QueryError> error;
    std::chrono::system_clock::time_point submit_wall, end_wall;
    int64_t queued_ms = 0, elapsed_ms = 0;
    int64_t rows_delivered = 0, bytes_delivered = 0, rows_produced = 0, cpu_time_ns = 0;
    /// Unset in a record of a version that did not keep them.
    std::optional<std::chrono::system_clock::time_point> exec_start_wall, first_row_wall;
    std::string canceled_by;
  };
  /// A completed request read back from the query history at start-up, for the pages and
  /// lookups only: terminal, its final page delivered, with the recorded times and counters.
  ClientRequestState(const UniqueId& id, std::shared_ptr<const std::string> statement,
                     SessionInfo session, const Restored& restored);

  const UniqueId& query_id() const { return id_; }
  /// 16 hex digits, random, a capability of the nextUri; compare with SlugMatches().
  const std::string& slug() const { return slug_; }
  bool SlugMatches(std::string_view candidate) const;
  const std::shared_ptr<const std::string>& statement() const { return statement_; }
  const SessionInfo& session() const { return session_; }
  /// How the statement runs: what SQLite executes, its parameters, the response headers of
  /// a session statement (session-statements.h). Immutable.
  const StatementPlan& plan() const { return plan_; }
  const std::string& user() const { return session_.user; }
  const std::string& principal() const { return session_.principal; }
  const std::string& client_address() const { return session_.client_address; }

  /// Time points. Wall clock for display, steady clock for durations.
  std::chrono::system_clock::time_point submit_wall_time() const { return submit_wall_; }
  std::chrono::steady_clock::time_point submit_time() const { return submit_steady_; }

  /// A snapshot of the fields the pages and /v1/query show.
  struct Info {
    State state;
    int64_t rows_delivered;
    int64_t bytes_delivered;
    int64_t rows_produced;
    int64_t cpu_time_ns;
    /// SQLite VM steps so far: progress before any row (QueryState::vm_steps).
    int64_t vm_steps;
    int64_t queued_ms;
    int64_t elapsed_ms;
    std::optional<std::chrono::system_clock::time_point> end_wall_time;
    /// When an executor thread started the statement and when the client was handed its
    /// first row (wall clock, derived from the steady clock); nullopt: not (yet), or a
    /// request restored from a history record of version 1 (which kept neither).
    std::optional<std::chrono::system_clock::time_point> exec_start_wall_time;
    std::optional<std::chrono::system_clock::time_point> first_row_wall_time;
    std::optional<QueryError> error;
    /// Who canceled the query (CANCELED by a user: "user 'bob'", with how); empty otherwise.
    std::string canceled_by;
    /// While the executor waits for the client (a spill quota is full): why.
    std::string blocked_reason;
  };
  Info GetInfo() const;
  State state() const;

  // Lifecycle, driven by QueryCoordinator.
  /// Attaches the executor-side query; its result buffer now feeds this request. Returns
  /// false, attaching nothing, if the request already left the registry (ReleaseExecution()
  /// ran: a cancel raced with admission); the caller then cancels 'exec' so that it ends and
  /// frees its admission slot without a request holding it for the query log's lifetime.
  [[nodiscard]] bool AttachExecution(QueryStateHandle exec);
  /// Moves to 'terminal' (FAILED or CANCELED) with 'error' unless already terminal, and
  /// cancels the executor-side query with it; 'who' (for Info::canceled_by) names who asked.
  /// Returns false if already terminal.
  bool Terminate(State terminal, QueryError error, std::string who = {});
  /// Called on every change of the executor side: wakes parked waiters.
  void OnExecutionChange();
  /// Drops the executor-side reference (keeping its final counters): called once the request
  /// leaves the registry, so the query log does not pin executor memory. Any later
  /// AttachExecution() is refused.
  void ReleaseExecution();
  /// True once the executor side has finished (or was never started and the request ended).
  bool execution_done() const;
  /// Milliseconds since an executor thread started the query; -1 if it has not started.
  int64_t exec_elapsed_ms() const;

  // The cursor.
  enum class FetchOutcome {
    kPage,       // 'page' is the answer
    kWait,       // nothing new yet: a waiter was registered ('waiter_id' set)
    kGone,       // 'token' is older than the last page: 410
    kNotFound,   // 'token' is beyond the next one: 404
    kTooManyRetries,  // the last page was already answered 'max_retries' more times: 429
  };
  /// Answers a GET of 'token'. A repeat of the last answered token gets the same page again
  /// (and does not count as client activity for the idle timeout), at most 'max_retries'
  /// times (0: no limit; beyond: kTooManyRetries, without the page). A
  /// GET of the next token takes the next page; if there is none yet and 'may_wait', registers
  /// 'waiter' (called once, with no lock held, at the next change) and returns kWait.
  FetchOutcome Fetch(int64_t token, bool may_wait, std::function<void()> waiter,
                     QueryPage* page, uint64_t* waiter_id, int max_retries = 0);
  /// Removes a waiter that has not fired (its long poll timed out).
  void RemoveWaiter(uint64_t waiter_id);
  /// True while a long-poll GET is parked on this request: its client is active.
  bool has_waiters() const;
  /// True once the client has been handed the final page (no nextUri).
  bool final_page_delivered() const;
  /// The answer to the POST: the current state, no rows, nextUri token = the next token.
  QueryPage CurrentPage();

  /// True while this request holds one of the coordinator's running-query slots. Owned by
  /// QueryCoordinator (exchange() makes the release happen exactly once).
  std::atomic<bool> holds_admission_slot{false};
  /// True while this request counts against the in-flight caps (QueryCoordinator, as above).
  std::atomic<bool> counted_in_flight{false};

  /// Last time the client asked for a new page (or submitted), steady clock nanoseconds. A
  /// retry of an answered token is not activity: it makes no progress.
  int64_t last_activity_ns() const { return last_activity_ns_.load(std::memory_order_relaxed); }
  void Touch();
  /// True once the client has fetched (any token) after the submission.
  bool ever_fetched() const { return ever_fetched_.load(std::memory_order_relaxed); }

 private:
  using Waiters = std::vector<std::pair<uint64_t, std::function<void()>>>;

  /// Computes the next page from the executor's buffer, or returns false if nothing new.
  bool NextPageLocked(QueryPage* out) QR_REQUIRES(lock_);
  void SetTerminalLocked(State s, std::optional<QueryError> error) QR_REQUIRES(lock_);
  void FillHeaderLocked(QueryPage* out) QR_REQUIRES(lock_);
  Waiters TakeWaitersLocked() QR_REQUIRES(lock_);

  const UniqueId id_;
  const std::string slug_;
  const std::shared_ptr<const std::string> statement_;
  const SessionInfo session_;
  const StatementPlan plan_;
  const std::chrono::system_clock::time_point submit_wall_;
  const std::chrono::steady_clock::time_point submit_steady_;
  std::atomic<int64_t> last_activity_ns_;
  std::atomic<bool> ever_fetched_{false};
  /// Set for a restored request: its queued time is the recorded one, not a computed one.
  const std::optional<int64_t> restored_queued_ms_;

  /// Protects everything below.
  mutable Mutex lock_;
  State state_ QR_GUARDED_BY(lock_) = State::kQueued;
  std::optional<QueryError> error_ QR_GUARDED_BY(lock_);
  QueryStateHandle exec_ QR_GUARDED_BY(lock_);
  /// ReleaseExecution() ran: no execution may be attached any more.
  bool execution_released_ QR_GUARDED_BY(lock_) = false;
  std::optional<std::chrono::steady_clock::time_point> start_time_ QR_GUARDED_BY(lock_);
  std::optional<std::chrono::steady_clock::time_point> end_time_ QR_GUARDED_BY(lock_);
  std::optional<std::chrono::system_clock::time_point> end_wall_ QR_GUARDED_BY(lock_);
  /// The executor's start, kept when the execution is released; the first row handed out.
  std::optional<std::chrono::steady_clock::time_point> exec_start_final_ QR_GUARDED_BY(lock_);
  std::optional<std::chrono::steady_clock::time_point> first_row_time_ QR_GUARDED_BY(lock_);
  std::string canceled_by_ QR_GUARDED_BY(lock_);
  std::shared_ptr<const std::vector<Column>> columns_ QR_GUARDED_BY(lock_);
  /// The token the client should GET next, and the answer to the previous one (for retries).
  int64_t next_token_ QR_GUARDED_BY(lock_) = 0;
  std::optional<QueryPage> last_page_ QR_GUARDED_BY(lock_);
  /// Times 'last_page_' was answered again.
  int last_page_retries_ QR_GUARDED_BY(lock_) = 0;
  bool final_delivered_ QR_GUARDED_BY(lock_) = false;
  int64_t rows_delivered_ QR_GUARDED_BY(lock_) = 0;
  int64_t bytes_delivered_ QR_GUARDED_BY(lock_) = 0;
  int64_t rows_produced_final_ QR_GUARDED_BY(lock_) = 0;
  int64_t cpu_time_ns_final_ QR_GUARDED_BY(lock_) = 0;
  int64_t vm_steps_final_ QR_GUARDED_BY(lock_) = 0;
  Waiters waiters_ QR_GUARDED_BY(lock_);
  uint64_t next_waiter_id_ QR_GUARDED_BY(lock_) = 1;
};

/// A counted reference to a request: std::shared_ptr's interface over a node in type-stable
/// memory, so that the registry's lookups take no lock (util/stable-ref-registry.h). Made by
/// MakeClientRequestState; the last reference destroys the request.
using ClientRequestStatePtr = StableRef<ClientRequestState>;

/// A new request with one reference (the arguments are ClientRequestState's constructor's).
template <class... Args>
ClientRequestStatePtr MakeClientRequestState(const UniqueId& query_id, Args&&... args) {
  return MakeStable<ClientRequestState>(query_id, query_id, std::forward<Args>(args)...);
}

/// The coordinator's process-wide registry of in-flight client requests (lookups without a
/// lock; issue 20, item 3).
using ClientRequestStateMap = StableRefRegistry<ClientRequestState>;

}  // namespace qr
