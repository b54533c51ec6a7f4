#include "service/runtime-tables.h"

#include <chrono>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "cluster/cluster-view.h"
#include "cluster/membership.h"
#include "service/cluster-queries.h"
#include "service/client-request-state.h"
#include "service/query-coordinator.h"
#include "service/query-history.h"
#include "service/version.h"
#include "util/unique-id.h"

namespace qr {
namespace {

int64_t EpochMillis(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

/// Trino's states: a query an executor has started is RUNNING even before its client polls
/// (the protocol moves QUEUED -> RUNNING on a poll); a canceled one is FAILED (USER_CANCELED).
const char* TrinoState(const ClientRequestState& req, ClientRequestState::State s) {
  using State = ClientRequestState::State;
  switch (s) {
    case State::kQueued: return req.exec_elapsed_ms() >= 0 ? "RUNNING" : "QUEUED";
    case State::kRunning: return "RUNNING";
    case State::kFinished: return "FINISHED";
    case State::kFailed:
    case State::kCanceled: return "FAILED";
  }
  return "FAILED";
}

RuntimeQueryRow RowOf(const ClientRequestState& req, std::chrono::system_clock::time_point now_wall,
                      std::chrono::steady_clock::time_point now_steady) {
  ClientRequestState::Info info = req.GetInfo();
  RuntimeQueryRow r;
  r.query_id = PrintId(req.query_id());
  r.state = TrinoState(req, info.state);
  r.user = req.user();
  r.source = req.session().source;
  r.query = req.statement();
  r.queued_time_ms = info.queued_ms;
  r.created_ms = EpochMillis(req.submit_wall_time());
  const int64_t exec_ms = req.exec_elapsed_ms();
  if (exec_ms >= 0 || ClientRequestState::IsTerminal(info.state)) {
    r.started_ms = r.created_ms + info.queued_ms;
  }
  // The last request of its client, on the wall clock.
  const int64_t idle_ns = now_steady.time_since_epoch().count() - req.last_activity_ns();
  r.last_heartbeat_ms = EpochMillis(now_wall) - std::max<int64_t>(0, idle_ns / 1000000);
  if (info.end_wall_time) r.end_ms = EpochMillis(*info.end_wall_time);
  if (info.error) {
    r.error_type = ErrorTypeName(info.error->type);
    r.error_code = info.error->name;
    r.error_message = info.error->message;
  }
  r.rows = info.rows_delivered;
  r.bytes = info.bytes_delivered;
  r.cpu_time_ms = info.cpu_time_ns / 1000000;
  r.vm_steps = info.vm_steps;
  r.client_info = req.session().client_info;
  r.client_tags = nlohmann::json(req.session().client_tags).dump();
  return r;
}

/// A row of the history: Trino's states, as RowOf().
RuntimeQueryRow RowOfRecord(QueryHistoryRecord&& q) {
  using State = ClientRequestState::State;
  RuntimeQueryRow r;
  r.query_id = PrintId(q.query_id);
  r.state = q.state == static_cast<uint8_t>(State::kFinished) ? "FINISHED" : "FAILED";
  r.user = std::move(q.user);
  r.source = std::move(q.source);
  r.query = std::move(q.statement);
  r.queued_time_ms = q.queued_ms;
  r.created_ms = q.submit_time_ms;
  // Version 1 records have no executor start: the end of the queued time.
  r.started_ms = q.exec_start_ms >= 0 ? q.exec_start_ms : q.submit_time_ms + q.queued_ms;
  r.last_heartbeat_ms = q.end_time_ms;
  r.end_ms = q.end_time_ms;
  if (q.error) {
    r.error_type = ErrorTypeName(q.error->type);
    r.error_code = q.error->name;
    r.error_message = std::move(q.error->message);
  }
  r.rows = q.rows_delivered;
  r.bytes = q.bytes_delivered;
  r.cpu_time_ms = q.cpu_time_ns / 1000000;
  r.client_info = std::move(q.client_info);
  r.client_tags = nlohmann::json(q.client_tags).dump();
  return r;
}

}  // namespace

bool CoordinatorRuntimeTables::CompletedQueries(const SqlViewer& viewer, size_t max,
                                                uint64_t* position,
                                                std::vector<RuntimeQueryRow>* batch) {
  QueryCoordinator* c = coordinator_.load(std::memory_order_acquire);
  if (c == nullptr) return false;
  const QueryHistory* history = c->options().history;
  if (history == nullptr) {
    // The log, oldest first: one snapshot, in one batch.
    if (*position != 0) return false;
    *position = 1;
    std::vector<ClientRequestStatePtr> log = c->Completed();
    const auto now_wall = std::chrono::system_clock::now();
    const auto now_steady = std::chrono::steady_clock::now();
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
      if (viewer.sees_all || (*it)->user() == viewer.user) {
        batch->push_back(RowOf(**it, now_wall, now_steady));
      }
    }
    return true;
  }
  // At most 'max' records and about kCompletedBatchBytes of them per batch: a batch is read
  // and decoded at once, and 256 records of 1 MiB statements would be 256 MiB (up to 8 GiB at
  // the 32 MiB a record's statement may keep) per scan.
  constexpr size_t kCompletedBatchBytes = 16 << 20;
  std::vector<HistoryIndexEntry> entries;
  const uint64_t next =
      history->index().Scan(*position, max, kCompletedBatchBytes,
                            [&entries](const HistoryIndexEntry& e) { entries.push_back(e); });
  if (entries.empty()) return false;
  *position = next;
  if (!viewer.sees_all) {
    // Names by number, each looked up once per batch.
    std::unordered_map<uint32_t, bool> mine;
    std::erase_if(entries, [&](const HistoryIndexEntry& e) {
      auto [it, added] = mine.try_emplace(e.user, false);
      if (added) it->second = history->index().Name(e.user) == viewer.user;
      return !it->second;
    });
  }
  std::vector<std::optional<QueryHistoryRecord>> records;
  history->ReadRecords(entries, &records);
  for (auto& record : records) {
    if (record) batch->push_back(RowOfRecord(std::move(*record)));
  }
  return true;
}

std::vector<RuntimeQueryRow> CoordinatorRuntimeTables::Queries(const SqlViewer& viewer) {
  std::vector<RuntimeQueryRow> out = LocalQueries(viewer);
  ClusterView* view = cluster_view_.load(std::memory_order_acquire);
  Webserver* web = web_.load(std::memory_order_acquire);
  if (view == nullptr || web == nullptr) return out;
  // The others' rows, asked as this session's user (each member applies its own rules).
  Forwarder::Outgoing request;
  request.target = std::string(kClusterRuntimeQueriesPath);
  request.principal = viewer.user;
  if (!viewer.user.empty()) request.headers.emplace_back("X-Trino-User", viewer.user);
  std::unordered_set<std::string> listed;
  for (const RuntimeQueryRow& r : out) listed.insert(r.query_id);
  for (const MemberAnswer& a : view->FanOutBlocking(request, web->io_context())) {
    std::vector<RuntimeQueryRow> rows;
    if (!a.ok || !RuntimeRowsFromJson(a.response.body, &rows)) continue;
    for (RuntimeQueryRow& r : rows) {
      if (listed.insert(r.query_id).second) out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<RuntimeQueryRow> CoordinatorRuntimeTables::LocalQueries(const SqlViewer& viewer) {
  QueryCoordinator* c = coordinator_.load(std::memory_order_acquire);
  std::vector<RuntimeQueryRow> out;
  if (c == nullptr) return out;
  // The registry first, then the log: Complete() moves a request from one to the other under
  // the log's lock, so a request missing from the registry's snapshot is in the log read
  // after it; one in both (it completed in between) is listed once.
  std::vector<ClientRequestStatePtr> in_flight = c->InFlight();
  std::vector<ClientRequestStatePtr> completed = c->Completed();
  auto visible = [&](const ClientRequestState& q) {
    return viewer.sees_all || q.user() == viewer.user;
  };
  const auto now_wall = std::chrono::system_clock::now();
  const auto now_steady = std::chrono::steady_clock::now();
  std::unordered_set<UniqueId> listed;
  out.reserve(in_flight.size() + completed.size());
  for (const auto& q : in_flight) {
    if (!visible(*q)) continue;
    listed.insert(q->query_id());
    out.push_back(RowOf(*q, now_wall, now_steady));
  }
  for (const auto& q : completed) {
    if (!visible(*q) || listed.contains(q->query_id())) continue;
    out.push_back(RowOf(*q, now_wall, now_steady));
  }
  return out;
}

std::vector<RuntimeNodeRow> CoordinatorRuntimeTables::Nodes() {
  RuntimeNodeRow self;
  {
    MutexLock l(&lock_);
    self.node_id = node_id_;
    self.http_uri = http_uri_;
  }
  self.node_version = QR_VERSION;
  self.coordinator = true;
  self.state = "active";
  const Membership* membership = membership_.load(std::memory_order_acquire);
  if (membership == nullptr) return {self};
  // In a cluster a node is named by its member id, the owner that query ids carry.
  const Membership::Snapshot cluster = membership->GetSnapshot();
  std::vector<RuntimeNodeRow> out;
  bool self_listed = false;
  for (const ClusterMember& m : cluster.members) {
    RuntimeNodeRow n;
    n.node_id = std::to_string(m.id);
    n.http_uri = m.uri;
    n.node_version = m.version;
    n.coordinator = true;
    n.state = "active";
    self_listed = self_listed || m.id == cluster.member_id;
    out.push_back(std::move(n));
  }
  // Not (yet, or no longer) in etcd's view, but serving: listed, under its state.
  if (!self_listed) {
    if (cluster.member_id != 0) self.node_id = std::to_string(cluster.member_id);
    self.state = ClusterStateName(cluster.state);
    out.push_back(std::move(self));
  }
  return out;
}

}  // namespace qr
