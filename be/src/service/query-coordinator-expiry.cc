// QueryCoordinator's timers: the expiration loop (idle, abandoned and over-time queries) and
// shutdown's drain, which waits only for queries whose clients are fetching.
#include "service/query-coordinator.h"

#include <algorithm>
#include <chrono>

#include <glog/logging.h>

#include "util/status.h"

namespace qr {
namespace {

int64_t NowNs() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

}  // namespace

int QueryCoordinator::Shutdown(int64_t grace_ms) {
  std::vector<ClientRequestStatePtr> queued;
  {
    MutexLock l(&admission_lock_);
    shutting_down_.store(true, std::memory_order_release);
    for (auto& [name, user] : users_) {
      for (auto& req : user.queue) queued.push_back(std::move(req));
      user.queue.clear();
    }
    queued_users_.clear();
    queued_ = 0;
  }
  LOG(INFO) << "Shutting down: " << queued.size() << " queued queries fail, running ones get "
            << grace_ms << " ms to finish";
  for (auto& req : queued) {
    FailRequest(req, QueryError::ShuttingDown("The server is shutting down"));
  }
  // A query is finished for its client once the client has its last page, not when the
  // executor is done (its rows may still sit in the buffer): wait for the registry to empty,
  // but only for queries whose clients are fetching. A client that goes quiet during the
  // wait is noticed within a second (the wait wakes at every completion and once a second).
  int canceled = CancelIdleAtShutdown();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      MutexLock l(&admission_lock_);
      if (registry_.Count() == 0) break;
      slots_changed_.WaitUntil(
          &admission_lock_, std::min(deadline, std::chrono::steady_clock::now() +
                                                   std::chrono::seconds(1)));
    }
    canceled += CancelIdleAtShutdown();
  }
  for (auto& req : InFlight()) {
    if (!req->execution_done() &&
        FailRequest(req,
                    QueryError::ShuttingDown("The server shut down before the query finished"))) {
      ++canceled;
    }
  }
  return canceled;
}

int QueryCoordinator::CancelIdleAtShutdown() {
  const int64_t idle_ns = options_.shutdown_client_idle_ms * 1000000;
  const int64_t now = NowNs();
  int canceled = 0;
  for (auto& req : InFlight()) {
    if (req->has_waiters() || now - req->last_activity_ns() <= idle_ns) continue;
    if (FailRequest(req, QueryError::ShuttingDown(
                             "The server is shutting down and the query's client was not "
                             "fetching results (no request for " +
                             std::to_string(options_.shutdown_client_idle_ms) + " ms)"))) {
      ++canceled;
    }
  }
  return canceled;
}

void QueryCoordinator::ExpireQueries() {
  const int64_t now = NowNs();
  PruneUnfetched(now);
  const int64_t idle_ns = options_.idle_query_timeout_ms * 1000000;
  // The engine's own check is exact; this backstop gives it a moment to act first.
  constexpr int64_t kExecLimitSlackMs = 500;
  const int64_t abandoned_ns = options_.abandoned_query_timeout_ms * 1000000;
  for (auto& req : InFlight()) {
    // A client parked in a long poll (maxWait may exceed the timeout) is not idle.
    const int64_t quiet_ns = now - req->last_activity_ns();
    if (idle_ns > 0 && quiet_ns > idle_ns && !req->has_waiters()) {
      if (FailRequest(req, QueryError::Abandoned("Query " + PrintId(req->query_id()) +
                                                 " was abandoned: no client request for " +
                                                 std::to_string(options_.idle_query_timeout_ms) +
                                                 " ms (--idle_query_timeout_s)"))) {
        abandoned_.fetch_add(1, std::memory_order_relaxed);
      }
    } else if (abandoned_ns > 0 && !req->ever_fetched() && quiet_ns > abandoned_ns) {
      if (FailRequest(req, QueryError::Abandoned(
                               "Query " + PrintId(req->query_id()) +
                               " was abandoned: its client never fetched a result within " +
                               std::to_string(options_.abandoned_query_timeout_ms) +
                               " ms of submitting it (--abandoned_query_timeout_s)"))) {
        abandoned_.fetch_add(1, std::memory_order_relaxed);
      }
    } else if (const int64_t limit_ms = ExecTimeLimitMs(*req);
               limit_ms > 0 && !req->execution_done() &&
               req->exec_elapsed_ms() > limit_ms + kExecLimitSlackMs) {
      // The engine enforces the limit while SQLite runs; this catches a query blocked on a
      // client that does not fetch (no SQLite step runs while the buffer is full).
      const bool session = limit_ms != options_.exec_time_limit_ms;
      FailRequest(req, QueryError::ExceededTimeLimit(
                           "Query exceeded the maximum execution time of " +
                           std::to_string(limit_ms) + " ms (" +
                           (session ? "the session's query_max_execution_time"
                                    : "--exec_time_limit_s") +
                           ")"));
    }
  }
}

ClientRequestStatePtr QueryCoordinator::KeepUnfetchedLocked(
    ClientRequestStatePtr req) {
  unfetched_index_[req->query_id()] = req;
  unfetched_.push_back(Unfetched{std::move(req), NowNs()});
  // As many as the log holds: the statements they keep (up to --max_statement_bytes each)
  // are bounded as the log's are, at most twice what the log alone kept.
  if (unfetched_.size() <= static_cast<size_t>(std::max(0, options_.query_log_size))) {
    return nullptr;
  }
  ClientRequestStatePtr dropped = std::move(unfetched_.front().req);
  unfetched_.pop_front();
  unfetched_index_.erase(dropped->query_id());
  return dropped;
}

int64_t QueryCoordinator::UnfetchedWindowNs() const {
  const int64_t ms = options_.abandoned_query_timeout_ms > 0 ? options_.abandoned_query_timeout_ms
                                                             : options_.idle_query_timeout_ms;
  return ms > 0 ? ms * 1000000 : INT64_MAX;
}

void QueryCoordinator::PruneUnfetched(int64_t now_ns) {
  std::vector<ClientRequestStatePtr> dropped;  // destroyed outside the lock
  const int64_t window_ns = UnfetchedWindowNs();
  MutexLock l(&log_lock_);
  while (!unfetched_.empty() && (unfetched_.front().req->final_page_delivered() ||
                                 now_ns - unfetched_.front().left_log_ns > window_ns)) {
    unfetched_index_.erase(unfetched_.front().req->query_id());
    dropped.push_back(std::move(unfetched_.front().req));
    unfetched_.pop_front();
  }
}

void QueryCoordinator::ExpirationLoop() {
  int64_t interval_ms = options_.expiration_interval_ms;
  if (interval_ms <= 0) {
    interval_ms = 1000;
    for (int64_t timeout : {options_.idle_query_timeout_ms, options_.abandoned_query_timeout_ms}) {
      if (timeout > 0) interval_ms = std::min(interval_ms, std::max<int64_t>(10, timeout / 4));
    }
  }
  MutexLock l(&stop_lock_);
  while (!stop_) {
    stop_cv_.WaitUntil(&stop_lock_,
                       std::chrono::steady_clock::now() + std::chrono::milliseconds(interval_ms));
    if (stop_) break;
    stop_lock_.unlock();
    ExpireQueries();
    stop_lock_.lock();
  }
}

}  // namespace qr
