#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/query-exec-mgr.h"
#include "runtime/sqlite-engine.h"
#include "service/client-request-state.h"
#include "service/failure-throttle.h"
#include "util/mutex.h"
#include "util/status.h"
#include "util/thread-annotations.h"

namespace qr {

class QueryHistory;

/// The server core of coordinatord, with no HTTP inside: submits statements, hands out result
/// pages, cancels, admits queries under limits, expires abandoned ones, keeps a bounded log of
/// completed queries, and counts what happens.
///
/// Call sequence: Submit() -> Fetch() (repeatedly, token by token) -> the final page completes
/// the request; or Cancel(). A request lives in the registry (in flight) until it is terminal
/// for the client, then moves to the completed-query log, where Find() still sees it.
/// Thread-safety: all methods are thread-safe.
/// Lock order (outermost first: holding one, a thread takes only locks further down; the same
/// order is in docs/architecture.md):
///   1. a long-poll GET's PendingFetch lock (statement-service.cc), held across Fetch();
///   2. 'admission_lock_', 'log_lock_', 'stop_lock_', never two at once;
///   3. a ClientRequestState's lock (DequeueLocked() reads states under 'admission_lock_');
///   4. that request's ResultBuffer lock (read under 3: see runtime/result-buffer.h);
///   5. a registry shard lock, a leaf (Complete() deletes from the registry under
///      'log_lock_', Shutdown() counts it under 'admission_lock_');
///   6. the QueryHistory's queue lock, a leaf taken with none of the above held
///      (RecordCompletion()); so is 7. the FailureThrottle's lock.
/// Callbacks run with none of 2-5 held: waiters (which take 1), the ResultBuffer's change
/// callback, QueryState::Cancel() and SqliteEngine::Execute().
class QueryCoordinator {
 public:
  struct Options {
    /// Queries executing at once; beyond it they queue.
    int max_running_queries = 16;
    /// Queries waiting for a running slot; beyond it a submission fails with QUERY_QUEUE_FULL.
    int max_queued_queries = 1000;
    /// Queries in the registry (queued, running, or finished but not fully fetched), in total
    /// and per user; beyond them a submission fails with QUERY_QUEUE_FULL.
    int max_in_flight_queries = 1000;
    int max_in_flight_queries_per_user = 200;
    /// Running slots one user may hold at once (0: three quarters of max_running_queries,
    /// at least 1).
    int max_running_queries_per_user = 0;
    /// A query whose client has not fetched for this long is abandoned (0: never).
    int64_t idle_query_timeout_ms = 300000;
    /// A query whose client never fetched after the submission is abandoned after this long
    /// (0: only 'idle_query_timeout_ms' applies).
    int64_t abandoned_query_timeout_ms = 30000;
    /// A GET of an already answered token (a client's retry) is answered with the same page
    /// at most this many times per page (0: no limit); beyond, 429.
    int max_page_retries = 10;
    /// Failed queries per second one user may have while other users have queries in
    /// flight; beyond, its submissions are refused (FailureThrottle; 0: no limit).
    int max_failed_queries_per_user_per_s = 0;
    /// Execution time limit (0: none).
    int64_t exec_time_limit_ms = 0;
    /// At shutdown, a query whose client has not fetched for this long (and has no parked
    /// long poll) is not waited for: it is canceled at once.
    int64_t shutdown_client_idle_ms = 5000;
    /// Completed queries kept for the debug pages and late lookups.
    int query_log_size = 200;
    /// How often the expiration thread looks; 0 derives it from the timeouts.
    int64_t expiration_interval_ms = 0;
    int num_shards = 0;  // 0: --registry_num_shards
    /// Where completed queries are recorded durably (null: nowhere). Borrowed: must outlive
    /// the coordinator.
    QueryHistory* history = nullptr;
    QueryContext exec_defaults;
    /// Tests only: called by Submit() once the request is registered (so Find() and
    /// Cancel() see it) and before it is admitted.
    std::function<void(const ClientRequestStatePtr&)> after_register_for_testing;
  };

  /// Borrows 'exec_mgr' and 'engine', which must outlive the coordinator.
  QueryCoordinator(Options options, QueryExecMgr* exec_mgr, SqliteEngine* engine);
  /// Stops the expiration thread. Queries still registered are canceled.
  ~QueryCoordinator();

  /// Registers a new request and admits it, queues it, or fails it (QUERY_QUEUE_FULL,
  /// SERVER_SHUTTING_DOWN). The request is returned in every case; a failed one reports its
  /// error on the first fetch, as the protocol wants.
  ClientRequestStatePtr Submit(std::shared_ptr<const std::string> statement,
                               SessionInfo session);

  /// An in-flight request, or a completed one still in the log; nullptr if neither.
  ClientRequestStatePtr Find(const UniqueId& id) const;

  /// ClientRequestState::Fetch(), plus completing the request once it is terminal.
  ClientRequestState::FetchOutcome Fetch(const ClientRequestStatePtr& req,
                                         int64_t token, bool may_wait,
                                         std::function<void()> waiter, QueryPage* page,
                                         uint64_t* waiter_id);

  /// Cancels with USER_CANCELED. NotFound if unknown; OK (no-op) if already terminal.
  /// 'who' (escaped by the caller) names who canceled, in the audit line of the log.
  Status Cancel(const UniqueId& id, std::string_view who = "the coordinator");
  /// Ends 'req' as FAILED with 'error': cancels its execution (if any), takes it out of the
  /// admission queue (if queued) and completes it. False if it was already terminal.
  bool FailRequest(const ClientRequestStatePtr& req, QueryError error);
  /// Ends 'req' as CANCELED with 'reason' (USER_CANCELED), the same way; 'who' is shown as
  /// who canceled (the per-query page). False if already terminal.
  bool CancelRequest(const ClientRequestStatePtr& req,
                     QueryError reason = QueryError::UserCanceled(), std::string who = {});
  /// CALL system.runtime.kill_query: cancels query 'query_id' for 'caller' with 'message',
  /// under /cancel_query's rules (with authentication, a non-admin only their own queries;
  /// another's is NOT_FOUND as if it did not exist). The error for the CALL, or nullopt.
  std::optional<QueryError> KillQuery(const std::string& query_id, const std::string& message,
                                      const SessionInfo& caller);

  /// In-flight requests (a registry snapshot: no lock held while the caller works).
  std::vector<ClientRequestStatePtr> InFlight() const;
  /// Completed requests, newest first.
  std::vector<ClientRequestStatePtr> Completed() const;
  /// Puts completed requests of an earlier run (oldest first, from the query history) into
  /// the completed-query log, as if they had just completed; the log keeps its size limit.
  void RestoreCompleted(std::vector<ClientRequestStatePtr> requests);

  /// Graceful shutdown: new submissions and queued queries fail with SERVER_SHUTTING_DOWN,
  /// in-flight ones get until 'grace_ms' to finish (executing, and their clients fetching
  /// every page), the ones still executing then are canceled. Queries whose clients are not
  /// fetching (no request for 'shutdown_client_idle_ms', no parked long poll) are not waited
  /// for: they fail at once, and again whenever one goes idle during the grace period.
  /// Returns the number canceled.
  int Shutdown(int64_t grace_ms);
  bool shutting_down() const { return shutting_down_.load(std::memory_order_acquire); }
  /// The owner new query ids carry (QueryOwner() in util/unique-id.h): this coordinator's
  /// member id in its cluster, 0 when it runs alone or has none yet. Thread-safe.
  void set_member_id(uint32_t id) { member_id_.store(id, std::memory_order_relaxed); }
  uint32_t member_id() const { return member_id_.load(std::memory_order_relaxed); }

  /// Runs one expiration pass now (the background thread calls it periodically).
  void ExpireQueries();

  struct Metrics {
    int64_t submitted, finished, failed, canceled, running, queued, in_flight;
    /// Submissions refused by each in-flight cap, and queries abandoned by their clients.
    int64_t rejected_in_flight, rejected_in_flight_per_user, rejected_queue_full, abandoned;
    /// Retries of an answered page refused by 'max_page_retries'.
    int64_t page_retries_refused;
    /// Users with at least one query in flight.
    int64_t users_in_flight;
  };
  Metrics GetMetrics() const;
  /// Upper bounds (ms) of the latency histogram buckets; the last bucket is +Inf.
  static constexpr std::array<int64_t, 12> kLatencyBucketsMs = {
      1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000, 300000};
  /// Cumulative counts per bucket (Prometheus style; the last entry is +Inf = total), and sum.
  std::vector<int64_t> LatencyHistogram(int64_t* sum_ms) const;

  /// The execution time limit of 'req' in ms (0: none): the server's, or its session's
  /// query_max_execution_time when lower (a session may lower the limit, never raise it).
  int64_t ExecTimeLimitMs(const ClientRequestState& req) const;
  /// Whether a user other than 'user' has a query in flight (the daemon serves someone else).
  bool OtherUsersInFlight(const std::string& user) const;
  /// The budget of failed queries per user (Options::max_failed_queries_per_user_per_s),
  /// drained by every query that fails with a user or resource error.
  FailureThrottle& failure_throttle() { return failure_throttle_; }
  const FailureThrottle& failure_throttle() const { return failure_throttle_; }

  const ClientRequestStateMap& registry() const { return registry_; }
  const Options& options() const { return options_; }

 private:
  void StartExecution(const ClientRequestStatePtr& req);
  void OnExecutionChange(const ClientRequestStatePtr& req);
  void ReleaseSlot(const ClientRequestStatePtr& req);
  /// Why 'req' (just registered) may not be admitted, or nullopt; counts it in flight if it
  /// may. Decides to run it now ('*start') or queue it.
  std::optional<QueryError> AdmitLocked(const ClientRequestStatePtr& req,
                                        bool* start) QR_REQUIRES(admission_lock_);
  /// The next queued request to run: the oldest query of the queued user served least
  /// recently (skipping users at their running cap); takes a running slot for it. nullptr if
  /// none may run.
  ClientRequestStatePtr DequeueLocked() QR_REQUIRES(admission_lock_);
  /// Dequeues (DequeueLocked()) while running slots are free.
  std::vector<ClientRequestStatePtr> TakeRunnableLocked() QR_REQUIRES(admission_lock_);
  void RemoveFromQueueLocked(const ClientRequestStatePtr& req)
      QR_REQUIRES(admission_lock_);
  /// FailRequest() and CancelRequest(): 'terminal' is kFailed or kCanceled.
  bool TerminateRequest(const ClientRequestStatePtr& req,
                        ClientRequestState::State terminal, QueryError error,
                        std::string who = {});
  /// Fails the in-flight requests whose clients are not fetching; returns how many.
  int CancelIdleAtShutdown();
  int max_running_per_user() const;
  /// Moves a terminal request from the registry to the log (idempotent).
  void Complete(const ClientRequestStatePtr& req);
  void RecordCompletion(const ClientRequestState& req);
  void ExpirationLoop();

  const Options options_;
  QueryExecMgr* const exec_mgr_;
  SqliteEngine* const engine_;
  ClientRequestStateMap registry_;
  FailureThrottle failure_throttle_{static_cast<double>(options_.max_failed_queries_per_user_per_s)};
  std::atomic<bool> shutting_down_{false};
  /// Relaxed: an id minted just before a change may name the earlier owner, as it would have
  /// a moment earlier.
  std::atomic<uint32_t> member_id_{0};

  /// Protects the admission state.
  mutable Mutex admission_lock_;
  /// Notified when a running slot frees up or a request leaves the registry (Shutdown()).
  CondVar slots_changed_;
  int running_ QR_GUARDED_BY(admission_lock_) = 0;
  /// Per user: queries in flight (registered and counted), running, and queued in arrival order.
  struct UserState {
    int in_flight = 0;
    int running = 0;
    /// When this user last got a running slot ('admissions_' then); 0: never.
    uint64_t last_admitted = 0;
    std::deque<ClientRequestStatePtr> queue;
  };
  std::unordered_map<std::string, UserState> users_ QR_GUARDED_BY(admission_lock_);
  /// Users with queued queries (each once).
  std::deque<std::string> queued_users_ QR_GUARDED_BY(admission_lock_);
  /// Running slots handed out so far: the clock of UserState::last_admitted.
  uint64_t admissions_ QR_GUARDED_BY(admission_lock_) = 0;
  int64_t queued_ QR_GUARDED_BY(admission_lock_) = 0;
  int64_t in_flight_ QR_GUARDED_BY(admission_lock_) = 0;

  /// Keeps 'req', pushed out of the full log before its client fetched the final answer (a
  /// query refused, failed before it ran or canceled completes at once, and its client's
  /// next GET must still find the error however many queries complete meanwhile), in
  /// 'unfetched_': until fetched, for UnfetchedWindowNs(), at most 'query_log_size' of
  /// them. Returns the one that had to go for it (null if none), for the caller to
  /// destroy outside the lock.
  ClientRequestStatePtr KeepUnfetchedLocked(ClientRequestStatePtr req)
      QR_REQUIRES(log_lock_);
  /// How long an unfetched query is kept: the wait a query's first fetch gets
  /// ('abandoned_query_timeout_ms', else 'idle_query_timeout_ms'; no limit if both are 0).
  int64_t UnfetchedWindowNs() const;
  /// Drops the kept unfetched queries that were fetched since or waited out their window
  /// (the expiration thread).
  void PruneUnfetched(int64_t now_ns);

  /// Protects the completed-query log.
  mutable Mutex log_lock_;
  std::deque<ClientRequestStatePtr> log_ QR_GUARDED_BY(log_lock_);
  std::unordered_map<UniqueId, ClientRequestStatePtr, UniqueIdHash> log_index_
      QR_GUARDED_BY(log_lock_);
  /// KeepUnfetchedLocked()'s queries, oldest first ('left_log_ns': when, steady clock).
  struct Unfetched {
    ClientRequestStatePtr req;
    int64_t left_log_ns;
  };
  std::deque<Unfetched> unfetched_ QR_GUARDED_BY(log_lock_);
  std::unordered_map<UniqueId, ClientRequestStatePtr, UniqueIdHash>
      unfetched_index_ QR_GUARDED_BY(log_lock_);

  std::atomic<int64_t> submitted_{0}, finished_{0}, failed_{0}, canceled_{0};
  std::atomic<int64_t> rejected_in_flight_{0}, rejected_in_flight_per_user_{0},
      rejected_queue_full_{0}, abandoned_{0}, page_retries_refused_{0};
  std::array<std::atomic<int64_t>, kLatencyBucketsMs.size() + 1> latency_buckets_{};
  std::atomic<int64_t> latency_sum_ms_{0};

  /// Protects 'stop_' and wakes the expiration thread.
  Mutex stop_lock_;
  CondVar stop_cv_;
  bool stop_ QR_GUARDED_BY(stop_lock_) = false;
  std::thread expiration_thread_;
};

}  // namespace qr
