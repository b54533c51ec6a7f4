#include "service/query-coordinator.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <glog/logging.h>

#include "runtime/registry-flags.h"
#include "service/access-control.h"
#include "service/query-history-convert.h"
#include "service/query-history.h"
#include "util/status.h"

namespace qr {
namespace {

using State = ClientRequestState::State;

}  // namespace

QueryCoordinator::QueryCoordinator(Options options, QueryExecMgr* exec_mgr, SqliteEngine* engine)
    : options_(std::move(options)),
      exec_mgr_(exec_mgr),
      engine_(engine),
      registry_(options_.num_shards > 0 ? options_.num_shards : FLAGS_registry_num_shards) {
  expiration_thread_ = std::thread([this] { ExpirationLoop(); });
}

QueryCoordinator::~QueryCoordinator() {
  {
    MutexLock l(&stop_lock_);
    stop_ = true;
  }
  stop_cv_.NotifyAll();
  expiration_thread_.join();
  for (auto& req : InFlight()) {
    FailRequest(req, QueryError::ShuttingDown("The server is shutting down"));
  }
  // Pending admissions hold no slot; drop them.
  MutexLock l(&admission_lock_);
  users_.clear();
  queued_users_.clear();
  queued_ = 0;
}

ClientRequestStatePtr QueryCoordinator::Submit(
    std::shared_ptr<const std::string> statement, SessionInfo session) {
  // Session statements (PREPARE, EXECUTE, USE, SET SESSION, ...) are planned here, from the
  // session the client sent; a plan that failed fails the query before admission.
  StatementPlan plan = PlanStatement(*statement, session);
  std::optional<QueryError> plan_error = std::move(plan.error);
  plan.error.reset();
  if (!plan_error && plan.kill_query_id) {
    plan_error = KillQuery(*plan.kill_query_id, plan.kill_message, session);
  }
  ClientRequestStatePtr req = MakeClientRequestState(
      GenerateQueryId(member_id()), std::move(statement), std::move(session), std::move(plan));
  // Ids are random 80-bit values (96 with no owner); a collision is a bug worth crashing on.
  CHECK(registry_.Add(req));
  submitted_.fetch_add(1, std::memory_order_relaxed);
  LOG(INFO) << "Query " << PrintId(req->query_id()) << " submitted by "
            << DescribeUser(req->user(), req->principal()) << " from "
            << QuoteForError(req->client_address()) << ": "
            << QuoteForError(*req->statement(), 120);
  if (options_.after_register_for_testing) options_.after_register_for_testing(req);

  std::optional<QueryError> rejection;
  bool start = false;
  std::vector<ClientRequestStatePtr> runnable;
  if (plan_error) {
    LOG(INFO) << "Query " << PrintId(req->query_id()) << " failed before it ran: "
              << plan_error->name << ": " << QuoteForError(plan_error->message, 300);
    FailRequest(req, std::move(*plan_error));
    return req;
  }
  {
    MutexLock l(&admission_lock_);
    rejection = AdmitLocked(req, &start);
    if (!rejection && !start) runnable = TakeRunnableLocked();
  }
  if (rejection) {
    LOG(INFO) << "Query " << PrintId(req->query_id()) << " refused: " << rejection->name
              << ": " << QuoteForError(rejection->message, 300);
    FailRequest(req, std::move(*rejection));
  } else if (start) {
    StartExecution(req);
  }
  for (const auto& next : runnable) StartExecution(next);
  return req;
}

std::vector<ClientRequestStatePtr> QueryCoordinator::TakeRunnableLocked() {
  std::vector<ClientRequestStatePtr> out;
  while (running_ < options_.max_running_queries) {
    ClientRequestStatePtr next = DequeueLocked();
    if (!next) break;
    out.push_back(std::move(next));
  }
  return out;
}

std::optional<QueryError> QueryCoordinator::AdmitLocked(
    const ClientRequestStatePtr& req, bool* start) {
  // Registered, hence findable, before it got here: a cancel may have ended it meanwhile.
  // Its Complete() found nothing counted (or will: Terminate() set the state before it
  // takes this lock), so it is neither counted nor queued; its client fetches the end.
  if (ClientRequestState::IsTerminal(req->state())) return std::nullopt;
  if (shutting_down()) {
    return QueryError::ShuttingDown("The server is shutting down; no new queries");
  }
  if (in_flight_ >= options_.max_in_flight_queries) {
    rejected_in_flight_.fetch_add(1, std::memory_order_relaxed);
    return QueryError::QueueFull(
        "Too many queries in flight: " + std::to_string(in_flight_) +
        " queued, running or waiting for their clients to fetch the results, the limit is " +
        std::to_string(options_.max_in_flight_queries) + " (--max_in_flight_queries)");
  }
  auto found = users_.find(req->user());
  const UserState no_queries;
  const UserState& known = found != users_.end() ? found->second : no_queries;
  if (known.in_flight >= options_.max_in_flight_queries_per_user) {
    rejected_in_flight_per_user_.fetch_add(1, std::memory_order_relaxed);
    return QueryError::QueueFull(
        "Too many queries in flight for user '" + req->user() + "': " +
        std::to_string(known.in_flight) + ", the limit is " +
        std::to_string(options_.max_in_flight_queries_per_user) +
        " (--max_in_flight_queries_per_user); fetch or cancel earlier queries first");
  }
  // Nobody overtakes a queued query: with a queue, a newcomer queues too.
  const bool may_run = running_ < options_.max_running_queries &&
                       known.running < max_running_per_user() && queued_ == 0;
  if (!may_run && queued_ >= options_.max_queued_queries) {
    rejected_queue_full_.fetch_add(1, std::memory_order_relaxed);
    return QueryError::QueueFull(
        "Too many queued queries: " + std::to_string(running_) + " running and " +
        std::to_string(queued_) + " queued, the limits are " +
        std::to_string(options_.max_running_queries) + " and " +
        std::to_string(options_.max_queued_queries) +
        " (--max_running_queries, --max_queued_queries)");
  }
  // Created only for an admitted query: refused ones never grow the map.
  UserState& user = found != users_.end() ? found->second : users_[req->user()];
  ++in_flight_;
  ++user.in_flight;
  req->counted_in_flight.store(true);
  if (may_run) {
    ++running_;
    ++user.running;
    user.last_admitted = ++admissions_;
    req->holds_admission_slot.store(true);
    *start = true;
  } else {
    if (user.queue.empty()) queued_users_.push_back(req->user());
    user.queue.push_back(req);
    ++queued_;
  }
  return std::nullopt;
}

int QueryCoordinator::max_running_per_user() const {
  // By default a quarter of the slots stay for other users: one user's long queries cannot
  // take every slot, since a running query is never preempted.
  return options_.max_running_queries_per_user > 0
             ? options_.max_running_queries_per_user
             : std::max(1, options_.max_running_queries * 3 / 4);
}

ClientRequestStatePtr QueryCoordinator::DequeueLocked() {
  if (shutting_down()) return nullptr;
  // The slot goes to the queued user served least recently (never served: first), so one
  // user's backlog cannot starve another's query, whoever queued first; a user at its
  // running cap is skipped. Linear in the users with queued queries.
  for (;;) {
    auto chosen = queued_users_.end();
    UserState* best = nullptr;
    for (auto it = queued_users_.begin(); it != queued_users_.end(); ++it) {
      UserState& user = users_[*it];
      if (user.running >= max_running_per_user()) continue;
      if (best == nullptr || user.last_admitted < best->last_admitted) {
        best = &user;
        chosen = it;
      }
    }
    if (best == nullptr) return nullptr;
    ClientRequestStatePtr next = std::move(best->queue.front());
    best->queue.pop_front();
    --queued_;
    if (best->queue.empty()) queued_users_.erase(chosen);
    if (ClientRequestState::IsTerminal(next->state())) continue;  // failed while queued
    ++running_;
    ++best->running;
    best->last_admitted = ++admissions_;
    next->holds_admission_slot.store(true);
    return next;
  }
}

void QueryCoordinator::RemoveFromQueueLocked(const ClientRequestStatePtr& req) {
  auto it = users_.find(req->user());
  if (it == users_.end()) return;
  auto& queue = it->second.queue;
  auto pos = std::find(queue.begin(), queue.end(), req);
  if (pos == queue.end()) return;
  queue.erase(pos);
  --queued_;
  if (queue.empty()) {
    queued_users_.erase(std::find(queued_users_.begin(), queued_users_.end(), req->user()));
    // Its final page may have been delivered (and its in-flight count released) while it
    // was still queued: a parked poll woken by the cancel. Then this was the user's last
    // trace, and Complete() left the entry for it.
    if (it->second.in_flight == 0 && it->second.running == 0) users_.erase(it);
  }
}

void QueryCoordinator::StartExecution(const ClientRequestStatePtr& req) {
  QueryContext ctx = options_.exec_defaults;
  ctx.statement = req->statement();
  ctx.sql = req->plan().sql;
  ctx.parameters = req->plan().parameters;
  ctx.describe_output = req->plan().describe_output;
  ctx.user = req->user();
  ctx.sees_all_queries = req->session().sees_all_queries;
  ctx.exec_time_limit_ms = ExecTimeLimitMs(*req);
  QueryStateHandle exec;
  Status s = exec_mgr_->CreateQueryState(req->query_id(), std::move(ctx), &exec);
  if (!s.ok()) {
    FailRequest(req, QueryError::Internal(s.message()));
    ReleaseSlot(req);
    return;
  }
  // A strong reference: the slot must be released when execution ends even if the request
  // has already been completed and evicted from the query log by then (a weak reference
  // leaked the slot). No cycle outlives the query: the request drops its executor reference
  // in Complete(), and the QueryState holding this callback dies with the engine's reference.
  exec->result_buffer()->SetOnChange([this, req] { OnExecutionChange(req); });
  exec->set_exec_state(QueryState::ExecState::kQueued);
  // A cancel that raced with admission: the request is terminal (and, if it already left the
  // registry, refuses the execution) but the execution never saw the cancel. Canceled, it
  // still goes to the engine, which ends it and so frees the slot.
  const bool attached = req->AttachExecution(exec.Clone());
  if (!attached || ClientRequestState::IsTerminal(req->state())) {
    exec->Cancel(QueryError::UserCanceled());
  }
  engine_->Execute(std::move(exec));
}

void QueryCoordinator::OnExecutionChange(const ClientRequestStatePtr& req) {
  req->OnExecutionChange();
  if (req->execution_done()) ReleaseSlot(req);
}

void QueryCoordinator::ReleaseSlot(const ClientRequestStatePtr& req) {
  if (!req->holds_admission_slot.exchange(false)) return;
  std::vector<ClientRequestStatePtr> runnable;
  {
    MutexLock l(&admission_lock_);
    --running_;
    auto it = users_.find(req->user());
    DCHECK(it != users_.end());
    if (--it->second.running == 0 && it->second.in_flight == 0 && it->second.queue.empty()) {
      users_.erase(it);
    }
    runnable = TakeRunnableLocked();
  }
  slots_changed_.NotifyAll();
  for (const auto& next : runnable) StartExecution(next);
}

ClientRequestStatePtr QueryCoordinator::Find(const UniqueId& id) const {
  if (ClientRequestStatePtr r = registry_.Get(id)) return r;
  MutexLock l(&log_lock_);
  if (auto it = log_index_.find(id); it != log_index_.end()) return it->second;
  auto it = unfetched_index_.find(id);
  return it == unfetched_index_.end() ? nullptr : it->second;
}

ClientRequestState::FetchOutcome QueryCoordinator::Fetch(
    const ClientRequestStatePtr& req, int64_t token, bool may_wait,
    std::function<void()> waiter, QueryPage* page, uint64_t* waiter_id) {
  auto outcome =
      req->Fetch(token, may_wait, std::move(waiter), page, waiter_id, options_.max_page_retries);
  if (outcome == ClientRequestState::FetchOutcome::kTooManyRetries) {
    page_retries_refused_.fetch_add(1, std::memory_order_relaxed);
  }
  if (outcome == ClientRequestState::FetchOutcome::kPage && !page->next_token) Complete(req);
  return outcome;
}

bool QueryCoordinator::FailRequest(const ClientRequestStatePtr& req,
                                   QueryError error) {
  return TerminateRequest(req, State::kFailed, std::move(error));
}

bool QueryCoordinator::CancelRequest(const ClientRequestStatePtr& req,
                                     QueryError reason, std::string who) {
  return TerminateRequest(req, State::kCanceled, std::move(reason), std::move(who));
}

bool QueryCoordinator::TerminateRequest(const ClientRequestStatePtr& req,
                                        State terminal, QueryError error, std::string who) {
  if (!req->Terminate(terminal, std::move(error), std::move(who))) return false;
  {
    // A request failed while waiting for admission must not keep occupying the queue.
    MutexLock l(&admission_lock_);
    RemoveFromQueueLocked(req);
  }
  Complete(req);
  return true;
}

std::optional<QueryError> QueryCoordinator::KillQuery(const std::string& query_id,
                                                      const std::string& message,
                                                      const SessionInfo& caller) {
  UniqueId id;
  ClientRequestStatePtr target;
  if (ParseId(query_id, &id).ok()) target = Find(id);
  // Another user's query is answered as if it did not exist, as /cancel_query does.
  if (!target || (!caller.sees_all_queries && target->user() != caller.user)) {
    return QueryError::NotFound("Target query not found: " + QuoteForError(query_id, 100));
  }
  QueryError killed = QueryError::UserCanceled();
  killed.message = message.empty() ? "Query killed. No message provided."
                                   : "Query killed. Message: " + message;
  if (!CancelRequest(target, std::move(killed),
                     DescribeUser(caller.user, caller.principal) +
                         " (system.runtime.kill_query)")) {
    return QueryError::GenericUser("Target query is not running: " + PrintId(id));
  }
  LOG(INFO) << "Query " << PrintId(id) << " of "
            << DescribeUser(target->user(), target->principal()) << " killed by "
            << DescribeUser(caller.user, caller.principal)
            << " (system.runtime.kill_query): " << QuoteForError(message, 300);
  return std::nullopt;
}

Status QueryCoordinator::Cancel(const UniqueId& id, std::string_view who) {
  ClientRequestStatePtr req = Find(id);
  if (!req) return NotFound("query " + PrintId(id) + " is not known (never existed, or expired)");
  if (CancelRequest(req, QueryError::UserCanceled(), std::string(who))) {
    LOG(INFO) << "Query " << PrintId(id) << " of " << DescribeUser(req->user(), req->principal())
              << " canceled by " << who;
  }
  return Status::OK();
}

void QueryCoordinator::Complete(const ClientRequestStatePtr& req) {
  ClientRequestStatePtr evicted;  // destroyed at the end, outside the lock
  {
    // The move from the registry to the log happens under 'log_lock_': Find() looks in the
    // registry, then in the log under 'log_lock_', so it never misses a completing request.
    MutexLock l(&log_lock_);
    if (!registry_.Delete(req->query_id())) return;  // someone else completed it
    log_.push_back(req);
    log_index_[req->query_id()] = req;
    if (static_cast<int>(log_.size()) > std::max(0, options_.query_log_size)) {
      evicted = std::move(log_.front());
      log_.pop_front();
      log_index_.erase(evicted->query_id());
      if (!evicted->final_page_delivered()) evicted = KeepUnfetchedLocked(std::move(evicted));
    }
  }
  req->ReleaseExecution();
  RecordCompletion(*req);
  {
    // Shutdown() waits for the registry to empty: the lock orders this change before its
    // check or after its wait began, so the notification is never lost.
    MutexLock l(&admission_lock_);
    if (req->counted_in_flight.exchange(false)) {
      --in_flight_;
      auto it = users_.find(req->user());
      if (it != users_.end() && --it->second.in_flight == 0 && it->second.running == 0 &&
          it->second.queue.empty()) {
        users_.erase(it);
      }
    }
  }
  slots_changed_.NotifyAll();
}

void QueryCoordinator::RecordCompletion(const ClientRequestState& req) {
  ClientRequestState::Info info = req.GetInfo();
  switch (info.state) {
    case State::kFinished: finished_.fetch_add(1, std::memory_order_relaxed); break;
    case State::kCanceled: canceled_.fetch_add(1, std::memory_order_relaxed); break;
    default: failed_.fetch_add(1, std::memory_order_relaxed); break;
  }
  // The server's own failures (internal errors, shutdown) are not the user's.
  if (info.state == State::kFailed && info.error &&
      info.error->type != ErrorType::kInternalError) {
    failure_throttle_.OnFailure(req.user());
  }
  size_t bucket = 0;
  while (bucket < kLatencyBucketsMs.size() && info.elapsed_ms > kLatencyBucketsMs[bucket]) {
    ++bucket;
  }
  latency_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  latency_sum_ms_.fetch_add(info.elapsed_ms, std::memory_order_relaxed);
  // No lock held: the writer takes the record (never waiting for the disk).
  if (options_.history != nullptr) options_.history->Append(MakeHistoryRecord(req, info));
  LOG(INFO) << "Query " << PrintId(req.query_id()) << " ended: "
            << DescribeUser(req.user(), req.principal()) << ", state "
            << ClientRequestState::StateName(info.state) << ", " << info.elapsed_ms << " ms, "
            << info.rows_delivered << " rows"
            << (info.error ? ", error " + info.error->name + ": " +
                                 QuoteForError(info.error->message, 300)
                           : "");
}

std::vector<ClientRequestStatePtr> QueryCoordinator::InFlight() const {
  return registry_.Snapshot();
}

std::vector<ClientRequestStatePtr> QueryCoordinator::Completed() const {
  MutexLock l(&log_lock_);
  return std::vector<ClientRequestStatePtr>(log_.rbegin(), log_.rend());
}

void QueryCoordinator::RestoreCompleted(
    std::vector<ClientRequestStatePtr> requests) {
  MutexLock l(&log_lock_);
  const size_t limit = static_cast<size_t>(std::max(0, options_.query_log_size));
  for (auto& req : requests) {
    log_index_[req->query_id()] = req;
    log_.push_back(std::move(req));
    if (log_.size() > limit) {
      log_index_.erase(log_.front()->query_id());
      log_.pop_front();
    }
  }
}

int64_t QueryCoordinator::ExecTimeLimitMs(const ClientRequestState& req) const {
  const int64_t server = options_.exec_time_limit_ms;
  const int64_t asked = req.plan().exec_time_limit_ms;
  return asked > 0 && (server == 0 || asked < server) ? asked : server;
}

bool QueryCoordinator::OtherUsersInFlight(const std::string& user) const {
  MutexLock l(&admission_lock_);
  return users_.size() > users_.count(user);
}

QueryCoordinator::Metrics QueryCoordinator::GetMetrics() const {
  Metrics m;
  m.submitted = submitted_.load();
  m.finished = finished_.load();
  m.failed = failed_.load();
  m.canceled = canceled_.load();
  m.in_flight = static_cast<int64_t>(registry_.Count());
  m.rejected_in_flight = rejected_in_flight_.load();
  m.rejected_in_flight_per_user = rejected_in_flight_per_user_.load();
  m.rejected_queue_full = rejected_queue_full_.load();
  m.page_retries_refused = page_retries_refused_.load();
  m.abandoned = abandoned_.load();
  MutexLock l(&admission_lock_);
  m.running = running_;
  m.queued = queued_;
  m.users_in_flight = static_cast<int64_t>(users_.size());
  return m;
}

std::vector<int64_t> QueryCoordinator::LatencyHistogram(int64_t* sum_ms) const {
  std::vector<int64_t> cumulative;
  int64_t total = 0;
  for (const auto& b : latency_buckets_) {
    total += b.load(std::memory_order_relaxed);
    cumulative.push_back(total);
  }
  *sum_ms = latency_sum_ms_.load(std::memory_order_relaxed);
  return cumulative;
}

}  // namespace qr
