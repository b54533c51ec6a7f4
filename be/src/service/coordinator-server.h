#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cluster/cluster-tls.h"
#include "cluster/cluster-view.h"
#include "cluster/forwarder.h"
#include "cluster/membership.h"
#include "runtime/memory-budget.h"
#include "runtime/query-exec-mgr.h"
#include "runtime/spill-accounting.h"
#include "runtime/sqlite-connection.h"
#include "runtime/sqlite-engine.h"
#include "service/access-control.h"
#include "service/page-workers.h"
#include "service/query-coordinator.h"
#include "service/query-history.h"
#include "service/runtime-tables.h"
#include "service/statement-service.h"
#include "http/http-auth.h"
#include "http/tls-context.h"
#include "util/mutex.h"
#include "util/status.h"
#include "http/webserver.h"

namespace qr {

/// Everything coordinatord runs, wired together: the executor registry, the SQLite engine, the
/// coordinator, the HTTP server with the protocol and debug handlers. The daemon's main() and
/// the integration tests both use it.
/// Thread-safety: Start() and Shutdown() from one thread; accessors are thread-safe.
/// Lifecycle: Start() -> (serve) -> Shutdown() -> destroy.
class CoordinatorServer {
 public:
  struct Options {
    /// The SQLite file to serve; empty: the sample database in 'data_dir'.
    std::string database;
    /// The served catalog's name (--catalog_name).
    std::string catalog_name = "sqlite";
    std::string data_dir = "data";
    double sample_scale_factor = 0.01;
    int num_query_threads = 2;
    /// Lower CPU priority for the executors of long queries (LongQueryDemoter).
    LongQueryDemoter::Options long_query{};
    /// SqliteEngine::Options::max_long_queries_per_user (0: no limit).
    int max_long_queries_per_user = 0;
    /// Resource budgets (docs/operations.md#resource-limits); every one is > 0.
    /// Encoded results held by all queries, and by one query.
    int64_t max_result_memory_bytes = int64_t{1} << 30;
    int64_t query_max_memory_bytes = int64_t{128} << 20;
    /// SQLite's heap, process-wide (sqlite3_hard_heap_limit64).
    int64_t sqlite_heap_limit_bytes = int64_t{512} << 20;
    /// One value or row (SQLITE_LIMIT_LENGTH, SqliteConnection::Open()).
    int64_t max_value_bytes = SqliteConnection::kDefaultMaxValueBytes;
    /// SQLite's temporary files: where (empty: '<data_dir>/spill'), in total and per query.
    std::string spill_dir;
    int64_t max_spill_bytes = int64_t{8} << 30;
    int64_t query_max_spill_bytes = int64_t{2} << 30;
    Webserver::Options http;
    QueryCoordinator::Options coordinator;
    /// The durable query history (docs/operations.md#query-history); an empty 'dir' turns
    /// it off. Its newest records (up to the query log's size) are shown again after a start.
    QueryHistory::Options history;
    StatementService::Options protocol;
    /// Comma-separated users who may see and cancel every query (and, with authentication,
    /// act as other users).
    std::string admin_users;
    /// Security (docs/operations.md#security). A password file turns authentication on.
    std::string auth_password_file;
    /// Its 'trusted_proxies' are set from 'http_trusted_proxies'.
    BasicAuthenticator::Options auth;
    /// Comma-separated addresses and CIDRs of proxies whose X-Forwarded-For names the client
    /// (IpNetworks::Parse(); empty: none). Checked by Start().
    std::string http_trusted_proxies;
    /// Comma-separated host names requests may name in Host besides localhost and IP
    /// addresses ("*": any). Checked (a DNS rebinding defence) when given, and on a server
    /// bound to loopback without authentication whatever it is (IsAllowedHost()).
    std::string http_allowed_hosts;
    /// Allow password authentication without TLS (credentials in clear text).
    bool allow_insecure_auth = false;
    /// Both set: serve HTTPS only.
    std::string tls_cert_file;
    std::string tls_key_file;
    /// /metrics also lists every registry shard (2 registries x shards x 5 series); by
    /// default only per-registry aggregates.
    bool metrics_per_shard = false;
    /// The threads that answer GET /queries?json off the HTTP I/O threads
    /// (--queries_list_threads, --queries_list_max_pending).
    PageWorkers::Options queries_list;
    /// Membership of a cluster in etcd (docs/operations.md#cluster); no 'endpoints': the
    /// coordinator runs alone. An empty 'advertised_uri' is the scheme and the bound address;
    /// Start() sets 'version' and 'start_time_ms'.
    Membership::Options cluster;
    /// Forwarding of other members' queries' follow-ups (cluster only): the bound beyond a
    /// poll's maxWait and the idle connections kept per member.
    std::chrono::milliseconds forward_timeout{5000};
    size_t forward_pool_size = 8;
    /// How long the other members may take to answer their part of a cluster-wide listing
    /// (--cluster_view_timeout_ms).
    std::chrono::milliseconds cluster_view_timeout{2000};
    /// How long the per-query page's EXPLAIN (/query_plan) may wait and run before it fails
    /// with EXCEEDED_TIME_LIMIT (--query_plan_timeout_ms); > 0.
    std::chrono::milliseconds query_plan_timeout{10000};
    /// At shutdown, how long the HTTP server may take to finish the requests under way
    /// (Webserver::Drain(); --shutdown_drain_s) before it stops; 0: it stops at once.
    std::chrono::milliseconds shutdown_drain{5000};
    /// The cluster's shared secret (LoadClusterSecret()); empty: none (with authentication,
    /// forwarded principals are refused and forwarded requests authenticated again).
    std::string cluster_secret_file;
    /// TLS towards members whose advertised URI is https:// (--cluster_ca_file, client
    /// certificate); checked by Start() when clustered or when any is set.
    ClusterTlsFiles cluster_tls;
    /// TLS towards etcd endpoints given as https:// (--etcd_ca_file, client certificate);
    /// checked by Start() when an endpoint is https:// or any is set ('flag_prefix' "etcd").
    ClusterTlsFiles etcd_tls;
  };

  explicit CoordinatorServer(Options options);
  ~CoordinatorServer();

  /// Prepares the database, starts the engine and the HTTP server. Errors name what failed.
  Status Start();
  /// Re-reads the password file (SIGHUP). On error the old users stay. QR_REQUIRES: started
  /// with authentication.
  Status ReloadPasswordFile();
  /// Re-reads --tls_cert_file and --tls_key_file (SIGHUP): connections accepted from now on
  /// get the new certificate, open ones keep theirs. On error (a missing or malformed file, a
  /// key that does not match) the old certificate stays in use. Counted either way
  /// (tls_reload_stats()). Thread-safe (reloads run one at a time). QR_REQUIRES: started with
  /// TLS.
  Status ReloadTlsCertificate();
  /// TLS certificate reloads that took effect and that failed, and the notAfter (Unix
  /// seconds) of the certificate in use (0 without TLS).
  struct TlsReloadStats {
    uint64_t reloads = 0;
    uint64_t failures = 0;
    int64_t not_after_unix_seconds = 0;
  };
  TlsReloadStats tls_reload_stats() const;
  bool tls_enabled() const { return !options_.tls_cert_file.empty(); }
  /// Re-reads this member's TLS files as a client of the other members (SIGHUP):
  /// --cluster_ca_file (or the system's trust store) and --cluster_client_cert_file/_key_file.
  /// Connections to members opened from now on use them; pooled ones keep theirs. On error
  /// (naming the flag and the file) the old ones stay in use. Counted either way. Thread-safe.
  /// QR_REQUIRES: started clustered (cluster_client_tls_enabled()).
  Status ReloadClusterClientTls();
  /// The same for etcd (--etcd_ca_file, --etcd_client_cert_file/_key_file): the membership's
  /// next connections to etcd use them. QR_REQUIRES: etcd_client_tls_enabled().
  Status ReloadEtcdClientTls();
  bool cluster_client_tls_enabled() const { return forwarder_ != nullptr; }
  bool etcd_client_tls_enabled() const {
    return membership_ != nullptr && membership_->uses_etcd_tls();
  }
  /// Reloads of the client TLS files that took effect and that failed, per target.
  struct ClientTlsReloadStats {
    uint64_t cluster_reloads = 0;
    uint64_t cluster_failures = 0;
    uint64_t etcd_reloads = 0;
    uint64_t etcd_failures = 0;
  };
  ClientTlsReloadStats client_tls_reload_stats() const;
  /// Graceful: stop admitting, give running queries 'grace_ms', cancel the rest, stop serving
  /// (after draining the requests under way for up to Options::shutdown_drain).
  /// Returns the number of queries canceled. Idempotent.
  int Shutdown(int64_t grace_ms);

  int port() const { return webserver_ ? webserver_->port() : 0; }
  const std::string& database_path() const { return database_path_; }
  QueryCoordinator* coordinator() { return coordinator_.get(); }
  const QueryCoordinator* coordinator() const { return coordinator_.get(); }
  QueryExecMgr* exec_mgr() { return exec_mgr_.get(); }
  const SqliteEngine* engine() const { return engine_.get(); }
  SqliteEngine* engine() { return engine_.get(); }
  Webserver* webserver() { return webserver_.get(); }
  const Options& options() const { return options_; }
  const AccessControl* access_control() const { return access_control_.get(); }
  /// Null without authentication.
  BasicAuthenticator* authenticator() { return authenticator_.get(); }
  /// The threads of GET /queries?json (null before Start()).
  PageWorkers* queries_list_workers() { return queries_list_workers_.get(); }
  /// Null before Start().
  const MemoryBudget* result_memory() const { return result_memory_.get(); }
  const SpillBudget* spill_budget() const { return spill_budget_.get(); }
  /// Null when the query history is off (or before Start()).
  const QueryHistory* history() const { return history_.get(); }
  /// What Start() read back from the query history.
  const HistoryReadStats& history_restored() const { return history_restored_; }
  /// Null when the coordinator runs alone (no etcd endpoints) or before Start(). Safe from
  /// the HTTP threads, which serve requests before Start() has made the membership.
  const Membership* membership() const {
    return membership_view_.load(std::memory_order_acquire);
  }
  /// Null when the coordinator runs alone (or before Start()).
  Forwarder* forwarder() { return forwarder_.get(); }
  const Forwarder* forwarder() const { return forwarder_.get(); }
  /// The cluster-wide listings; null when alone, before Start(), or with authentication but
  /// no cluster secret (no user could be carried to the others: each member lists its own).
  ClusterView* cluster_view() { return cluster_view_.get(); }
  const ClusterView* cluster_view() const { return cluster_view_.get(); }
  /// Null before Start().
  CoordinatorRuntimeTables* runtime_tables() { return runtime_tables_.get(); }
  /// EXPLAINs of the per-query page failed by 'query_plan_timeout' (/metrics).
  std::atomic<int64_t>& query_plan_timeouts() { return query_plan_timeouts_; }
  int64_t query_plan_timeouts() const { return query_plan_timeouts_.load(); }
  /// "http" or "https".
  const char* scheme() const { return options_.tls_cert_file.empty() ? "http" : "https"; }

 private:
  Options options_;
  std::string database_path_;
  std::string spill_dir_;
  std::unique_ptr<QueryExecMgr> exec_mgr_;
  /// Declared before the engine and the coordinator: their queries' pages and temporary
  /// files give their bytes back to these until the last one is gone.
  std::unique_ptr<MemoryBudget> result_memory_;
  std::unique_ptr<SpillBudget> spill_budget_;
  /// Lists the members in system.runtime.nodes: declared before the runtime tables.
  /// Set once by Start(), after the webserver listens (the advertised URI needs its port).
  std::unique_ptr<Membership> membership_;
  /// membership_.get(), published once it is wired up: the HTTP threads read this (/metrics,
  /// the debug pages) while Start() may still be setting membership_.
  std::atomic<const Membership*> membership_view_{nullptr};
  /// Joins the cluster when 'options_.cluster' names etcd endpoints.
  /// Builds the TLS context of https:// etcd endpoints into options_.cluster.etcd_tls.
  Status ConfigureEtcdTls();
  void StartMembership(const std::string& bound);
  /// Feeds the engine's system tables: declared before it, so it outlives its executors.
  std::unique_ptr<CoordinatorRuntimeTables> runtime_tables_;
  std::unique_ptr<SqliteEngine> engine_;
  /// Sets up the SQLite heap limit and the accounted temporary-file directory.
  Status ConfigureResources();
  /// Declared before the coordinator, which appends to it until it is gone.
  std::unique_ptr<QueryHistory> history_;
  HistoryReadStats history_restored_;
  /// Reads the history back and opens it for writing; 'restored' gets the requests.
  Status OpenHistory(std::vector<ClientRequestStatePtr>* restored);
  std::unique_ptr<QueryCoordinator> coordinator_;
  /// Sets up authentication and TLS in 'http'.
  Status ConfigureSecurity(Webserver::Options* http);

  /// With authentication: accepts a forwarded request's signed principal (kAllow, with
  /// req.authenticated_user set) or refuses it (401, logged).
  AuthVerdict CheckForwardedPrincipal(HttpRequest& req, HttpResponse* denied) const;
  /// With a cluster secret: a forwarded request's signed client address (kForwardedClientHeader)
  /// becomes req.remote_address, so that logs and limits name the client, not the forwarding
  /// member. False when the header is present but refused (401 in '*denied', logged). Without a
  /// secret the header cannot be checked and is ignored.
  bool ApplyForwardedClient(HttpRequest& req, HttpResponse* denied) const;
  /// Whether to log this refusal of a forwarded header: at most one line per 10 s, saying
  /// how many were refused since ('*since'). They are refused before any password check, so
  /// a client could otherwise write a WARNING line per request for nothing.
  bool ShouldLogForwardedRefusal(int64_t* since) const;
  std::string cluster_secret_;
  mutable std::atomic<int64_t> forwarded_refusal_logged_ms_{INT64_MIN};
  mutable std::atomic<int64_t> forwarded_refusals_unlogged_{0};
  /// The forwarder's TLS client context (cluster only).
  std::shared_ptr<boost::asio::ssl::context> cluster_tls_context_;
  /// Its pool's connections live on the webserver's io_contexts: closed after the webserver
  /// stopped, before it is destroyed.
  std::unique_ptr<Forwarder> forwarder_;
  /// Borrows the forwarder; its fan-outs in flight hold only their own state.
  std::unique_ptr<ClusterView> cluster_view_;

  /// Records the notAfter of the certificate in use (for /metrics) and logs the certificate,
  /// with a warning when it has expired; 'verb' starts the log line.
  void NoteTlsCertificate(const TlsCertificateInfo& info, const char* verb);
  /// Serializes ReloadTlsCertificate(), ReloadClusterClientTls() and ReloadEtcdClientTls().
  /// A leaf.
  Mutex tls_reload_mu_;
  std::atomic<uint64_t> tls_reloads_{0};
  std::atomic<uint64_t> tls_reload_failures_{0};
  std::atomic<int64_t> tls_certificate_not_after_{0};
  std::atomic<uint64_t> cluster_tls_reloads_{0};
  std::atomic<uint64_t> cluster_tls_reload_failures_{0};
  std::atomic<uint64_t> etcd_tls_reloads_{0};
  std::atomic<uint64_t> etcd_tls_reload_failures_{0};

  std::unique_ptr<BasicAuthenticator> authenticator_;
  std::unique_ptr<AccessControl> access_control_;
  std::unique_ptr<Webserver> webserver_;
  /// Stopped right after the webserver: their tasks use the coordinator and the forwarder.
  std::unique_ptr<PageWorkers> queries_list_workers_;
  std::unique_ptr<StatementService> statement_service_;
  std::atomic<int64_t> query_plan_timeouts_{0};
  bool shut_down_ = false;
};

}  // namespace qr
