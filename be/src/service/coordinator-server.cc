#include "service/coordinator-server.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <utility>


#include <boost/asio/ip/address.hpp>
#include <glog/logging.h>

#include "cluster/etcd-client.h"
#include "cluster/forward-auth.h"
#include "runtime/registry-flags.h"
#include "runtime/sample-db.h"
#include "runtime/sqlite-heap.h"
#include "runtime/thread-schedule.h"
#include "service/cluster-queries.h"
#include "service/debug-pages.h"
#include "service/query-history-convert.h"
#include "service/version.h"
#include "http/tls-context.h"
#include "util/check.h"

namespace qr {

CoordinatorServer::CoordinatorServer(Options options) : options_(std::move(options)) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(0); }

namespace {

/// How far from now a forwarded principal's signature may be (clock skew between members
/// plus the hop).
constexpr int64_t kForwardedPrincipalWindowMs = 30000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Sets 'http->allowed_hosts' from --http_allowed_hosts ('list'), or to none beyond
/// localhost and IP addresses on a loopback server without authentication ('auth').
Status ConfigureAllowedHosts(const std::string& list, bool auth, Webserver::Options* http) {
  std::vector<std::string> hosts;
  for (size_t begin = 0; begin <= list.size();) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    std::string name = list.substr(begin, end - begin);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (!name.empty()) {
      if (name.find_first_of(":/[]@ ") != std::string::npos) {
        return InvalidArgument("--http_allowed_hosts: " + QuoteForError(name, 100) +
                               " is not a host name (list names without port or scheme)");
      }
      hosts.push_back(std::move(name));
    }
    begin = end + 1;
  }
  boost::system::error_code ec;
  const boost::asio::ip::address bind = boost::asio::ip::make_address(http->bind_address, ec);
  // On loopback without authentication, any page a local browser opens could otherwise
  // point its own name at 127.0.0.1 and read every answer as the same origin. With
  // authentication the browser has no credentials for that name; on other addresses names
  // are the operator's to list.
  if (!hosts.empty() || (!ec && bind.is_loopback() && !auth)) {
    http->allowed_hosts = std::move(hosts);
  }
  return Status::OK();
}

}  // namespace

bool CoordinatorServer::ApplyForwardedClient(HttpRequest& req, HttpResponse* denied) const {
  const std::string_view header = req.Header(kForwardedClientHeader);
  if (header.empty() || cluster_secret_.empty()) return true;
  std::string client;
  const PrincipalCheck check =
      VerifyForwardedClient(cluster_secret_, header, req.method_string, req.target, NowMs(),
                            kForwardedPrincipalWindowMs, &client);
  if (check == PrincipalCheck::kOk) {
    req.remote_address = std::move(client);
    return true;
  }
  const std::string why = std::string("its signature is ") + PrincipalCheckName(check);
  if (int64_t since = 0; ShouldLogForwardedRefusal(&since)) {
    LOG(WARNING) << "Refused a forwarded client address (" << kForwardedClientHeader
                 << ") from " << req.remote_address << " on "
                 << QuoteForError(req.method_string, 16) << " "
                 << QuoteForError(req.target, 200) << ": " << why << " (" << since
                 << " more forwarded headers refused since the last such line)";
  }
  *denied = HttpResponse::Text(
      401, "The forwarded client address of this request is refused: " + why + "\n");
  return false;
}

bool CoordinatorServer::ShouldLogForwardedRefusal(int64_t* since) const {
  constexpr int64_t kIntervalMs = 10000;
  const int64_t now = NowMs();
  int64_t last = forwarded_refusal_logged_ms_.load(std::memory_order_relaxed);
  if ((last != INT64_MIN && now - last < kIntervalMs) ||
      !forwarded_refusal_logged_ms_.compare_exchange_strong(last, now,
                                                            std::memory_order_relaxed)) {
    forwarded_refusals_unlogged_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  *since = forwarded_refusals_unlogged_.exchange(0, std::memory_order_relaxed);
  return true;
}

AuthVerdict CoordinatorServer::CheckForwardedPrincipal(HttpRequest& req,
                                                       HttpResponse* denied) const {
  std::string why;
  if (cluster_secret_.empty()) {
    why = "this coordinator has no --cluster_secret_file, so it accepts no forwarded user";
  } else {
    const int64_t now = NowMs();
    std::string principal;
    const PrincipalCheck check =
        VerifyForwardedPrincipal(cluster_secret_, req.Header(kForwardedPrincipalHeader),
                                 req.method_string, req.target, now,
                                 kForwardedPrincipalWindowMs, &principal);
    if (check == PrincipalCheck::kOk) {
      req.authenticated_user = std::move(principal);
      return AuthVerdict::kAllow;
    }
    why = std::string("its signature is ") + PrincipalCheckName(check);
  }
  if (int64_t since = 0; ShouldLogForwardedRefusal(&since)) {
    LOG(WARNING) << "Refused a forwarded user (" << kForwardedPrincipalHeader << ") from "
                 << req.remote_address << " on " << QuoteForError(req.method_string, 16)
                 << " " << QuoteForError(req.target, 200) << ": " << why << " (" << since
                 << " more forwarded headers refused since the last such line)";
  }
  *denied = HttpResponse::Text(401, "The forwarded user of this request is refused: " + why +
                                        "\n");
  return AuthVerdict::kDeny;
}

Status CoordinatorServer::ConfigureSecurity(Webserver::Options* http) {
  Options& o = options_;
  if (!o.cluster_secret_file.empty()) {
    QR_RETURN_IF_ERROR(LoadClusterSecret(o.cluster_secret_file, &cluster_secret_));
  }
  // Checked whenever given, so that a typo shows before the member joins a cluster.
  if (!o.cluster.endpoints.empty() || !o.cluster_tls.ca_file.empty() ||
      !o.cluster_tls.client_cert_file.empty() || !o.cluster_tls.client_key_file.empty()) {
    QR_RETURN_IF_ERROR(CreateClusterTlsContext(o.cluster_tls, &cluster_tls_context_));
  }
  QR_RETURN_IF_ERROR(ConfigureEtcdTls());
  Status proxies = IpNetworks::Parse(o.http_trusted_proxies, &o.auth.trusted_proxies);
  if (!proxies.ok()) return InvalidArgument("--http_trusted_proxies: " + proxies.message());
  // A proxy carries many clients' connections: the per-address limit is not for it.
  http->per_address_exempt = o.auth.trusted_proxies;
  const bool tls = !o.tls_cert_file.empty() || !o.tls_key_file.empty();
  if (tls) {
    if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
      return InvalidArgument("TLS needs both --tls_cert_file and --tls_key_file");
    }
    QR_RETURN_IF_ERROR(CreateTlsServerContext(o.tls_cert_file, o.tls_key_file, &http->tls_context));
    TlsCertificateInfo info;
    QR_RETURN_IF_ERROR(GetTlsCertificateInfo(*http->tls_context, &info));
    NoteTlsCertificate(info, "Serving");
  }
  const bool auth = !o.auth_password_file.empty();
  QR_RETURN_IF_ERROR(ConfigureAllowedHosts(o.http_allowed_hosts, auth, http));
  access_control_ = std::make_unique<AccessControl>(auth, o.admin_users);
  if (!auth) {
    if (!cluster_secret_.empty()) {
      // Nothing to authenticate; the hook only takes a forwarded client's address over.
      http->authenticate = [this](HttpRequest& req, HttpResponse* denied, const AuthDeferrer&) {
        return ApplyForwardedClient(req, denied) ? AuthVerdict::kAllow : AuthVerdict::kDeny;
      };
    }
    return Status::OK();
  }
  if (!tls && !o.allow_insecure_auth) {
    return InvalidArgument(
        "password authentication over plain HTTP is refused: passwords would cross the network "
        "in clear text. Serve HTTPS with --tls_cert_file and --tls_key_file, or pass "
        "--allow_insecure_auth to allow it anyway");
  }
  PasswordFile file;
  QR_RETURN_IF_ERROR(PasswordFile::Load(o.auth_password_file, &file));
  LOG(INFO) << "Password authentication on: " << file.size() << " users from "
            << o.auth_password_file << (tls ? "" : " (over plain HTTP: --allow_insecure_auth)");
  authenticator_ = std::make_unique<BasicAuthenticator>(std::move(file), o.auth);
  http->authenticate = [this, auth = authenticator_.get()](
                           HttpRequest& req, HttpResponse* denied, const AuthDeferrer& defer) {
    if (!ApplyForwardedClient(req, denied)) return AuthVerdict::kDeny;
    // Forwarded by another member, which authenticated the client (forward-auth.h).
    if (!req.Header(kForwardedPrincipalHeader).empty()) {
      return CheckForwardedPrincipal(req, denied);
    }
    return auth->Check(req, denied, defer);
  };
  if (!o.cluster.endpoints.empty() && cluster_secret_.empty()) {
    LOG(WARNING) << "Clustered with authentication but no --cluster_secret_file: forwarded "
                    "requests carry the client's credentials and their owner checks them again";
  }
  http->authorize = [access = access_control_.get()](HttpRequest& req, HttpResponse* denied) {
    return access->CheckUserHeader(req, denied);
  };
  // Health checks of load balancers carry no credentials; the answer tells only OK or not.
  http->open_paths = {"/healthz"};
  return Status::OK();
}

Status CoordinatorServer::ConfigureResources() {
  const Options& o = options_;
  for (const auto& [value, flag] :
       {std::pair{o.max_result_memory_bytes, "--max_result_memory_mb"},
        std::pair{o.query_max_memory_bytes, "--query_max_memory_mb"},
        std::pair{o.sqlite_heap_limit_bytes, "--sqlite_heap_limit_mb"},
        std::pair{o.max_value_bytes, "--max_value_mb"},
        std::pair{o.max_spill_bytes, "--max_spill_mb"},
        std::pair{o.query_max_spill_bytes, "--query_max_spill_mb"}}) {
    if (value <= 0) return InvalidArgument(std::string(flag) + " must be positive");
  }
  // Process-wide: the last server started sets it (one per process outside of tests).
  Status heap = InstallSqliteHeap();
  if (!heap.ok()) LOG(WARNING) << heap.message() << "; SQLite's own accounting enforces the limit";
  SetSqliteHeapLimit(o.sqlite_heap_limit_bytes);
  result_memory_ = std::make_unique<MemoryBudget>(o.max_result_memory_bytes);
  spill_budget_ = std::make_unique<SpillBudget>(o.max_spill_bytes);
  spill_dir_ = !o.spill_dir.empty() ? o.spill_dir : o.data_dir + "/spill";
  const std::string& dir = spill_dir_;
  // The VFS is process-wide and installed once: temporary files opened outside any query
  // (generating the sample database) are charged to this budget, never refused.
  static SpillBudget* const unscoped = new SpillBudget(int64_t{1} << 62);
  Status s = InstallSpillAccountingVfs(unscoped, dir);
  if (s.code() == StatusCode::kAlreadyExists) {
    LOG(INFO) << "Temporary files of SQLite already accounted (" << s.message() << ")";
  } else {
    QR_RETURN_IF_ERROR(s);
    int64_t removed = 0;
    QR_RETURN_IF_ERROR(RemoveStaleSpillFiles(dir, &removed));
    LOG(INFO) << "SQLite temporary files go to " << dir << " (" << removed
              << " stale files of an earlier run removed)";
  }
  return Status::OK();
}

Status CoordinatorServer::OpenHistory(std::vector<ClientRequestStatePtr>* restored) {
  if (options_.history.dir.empty()) return Status::OK();
  const auto start = std::chrono::steady_clock::now();
  // Opening creates the directory (or says why it cannot) and starts a new, empty segment;
  // nothing is appended before the coordinator exists, so the read below sees only the past.
  Status s = QueryHistory::Open(options_.history, &history_);
  if (!s.ok()) return Internal("--query_history_dir: " + s.message());
  // Open() indexed every retained record (verifying each checksum); the newest fill the
  // completed-query log, read back through the index.
  history_restored_ = history_->index_stats();
  const size_t wanted = static_cast<size_t>(std::max(0, options_.coordinator.query_log_size));
  std::vector<std::optional<QueryHistoryRecord>> records;
  history_->ReadRecords(history_->index().Newest(wanted), &records);
  for (auto& record : records) {
    if (record) restored->push_back(RestoreFromHistory(std::move(*record)));
  }
  history_restored_.records = static_cast<int64_t>(restored->size());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start).count();
  LOG(INFO) << "Query history " << options_.history.dir << ": "
            << history_->index().size() << " completed queries indexed (" << restored->size()
            << " restored into the query log) from " << history_restored_.segments
            << " segments (" << history_restored_.bytes << " bytes) in " << ms << " ms; "
            << history_restored_.torn_tails << " torn tails, "
            << history_restored_.corrupt_segments << " corrupt segments and "
            << history_restored_.unreadable_segments << " unreadable segments skipped";
  return Status::OK();
}

Status CoordinatorServer::ReloadPasswordFile() {
  if (authenticator_ == nullptr) return InvalidArgument("authentication is off");
  PasswordFile file;
  QR_RETURN_IF_ERROR(PasswordFile::Load(options_.auth_password_file, &file));
  LOG(INFO) << "Reloaded " << file.size() << " users from " << options_.auth_password_file;
  authenticator_->Reload(std::move(file));
  return Status::OK();
}

void CoordinatorServer::NoteTlsCertificate(const TlsCertificateInfo& info, const char* verb) {
  tls_certificate_not_after_.store(info.not_after_unix_seconds, std::memory_order_relaxed);
  char until[32] = "?";
  const time_t t = static_cast<time_t>(info.not_after_unix_seconds);
  tm utc{};
  if (gmtime_r(&t, &utc) != nullptr) strftime(until, sizeof(until), "%Y-%m-%dT%H:%M:%SZ", &utc);
  const int64_t left_s = info.not_after_unix_seconds - NowMs() / 1000;
  if (left_s <= 0) {
    LOG(WARNING) << verb << " TLS certificate " << QuoteForError(options_.tls_cert_file, 256)
                 << " (" << info.subject << ") that EXPIRED at " << until
                 << ": clients will refuse it; renew it and send SIGHUP";
  } else {
    LOG(INFO) << verb << " TLS certificate " << QuoteForError(options_.tls_cert_file, 256)
              << " (" << info.subject << "), valid until " << until << " ("
              << left_s / 86400 << " days left)";
  }
}

Status CoordinatorServer::ReloadTlsCertificate() {
  if (options_.tls_cert_file.empty() || webserver_ == nullptr) {
    return InvalidArgument("TLS is off (no --tls_cert_file)");
  }
  // One reload at a time, so that the notAfter recorded is that of the context installed.
  MutexLock l(&tls_reload_mu_);
  std::shared_ptr<boost::asio::ssl::context> context;
  Status s = CreateTlsServerContext(options_.tls_cert_file, options_.tls_key_file, &context);
  TlsCertificateInfo info;
  if (s.ok()) s = GetTlsCertificateInfo(*context, &info);
  if (s.ok()) s = webserver_->ReplaceTlsContext(std::move(context));
  (s.ok() ? tls_reloads_ : tls_reload_failures_).fetch_add(1, std::memory_order_relaxed);
  // Logged once counted and in use: the line tells a watcher that new connections get it.
  if (s.ok()) NoteTlsCertificate(info, "Now serving");
  return s;
}

Status CoordinatorServer::ReloadClusterClientTls() {
  QR_CHECK(forwarder_ != nullptr, "ReloadClusterClientTls: not clustered");
  MutexLock l(&tls_reload_mu_);
  std::shared_ptr<boost::asio::ssl::context> context;
  Status s = CreateClusterTlsContext(options_.cluster_tls, &context);
  if (s.ok()) forwarder_->ReplaceTlsContext(std::move(context));
  (s.ok() ? cluster_tls_reloads_ : cluster_tls_reload_failures_)
      .fetch_add(1, std::memory_order_relaxed);
  return s;
}

Status CoordinatorServer::ReloadEtcdClientTls() {
  QR_CHECK(etcd_client_tls_enabled(), "ReloadEtcdClientTls: no https:// etcd endpoint");
  MutexLock l(&tls_reload_mu_);
  Status s = membership_->ReloadEtcdTls();
  (s.ok() ? etcd_tls_reloads_ : etcd_tls_reload_failures_).fetch_add(1, std::memory_order_relaxed);
  return s;
}

CoordinatorServer::ClientTlsReloadStats CoordinatorServer::client_tls_reload_stats() const {
  return ClientTlsReloadStats{cluster_tls_reloads_.load(std::memory_order_relaxed),
                              cluster_tls_reload_failures_.load(std::memory_order_relaxed),
                              etcd_tls_reloads_.load(std::memory_order_relaxed),
                              etcd_tls_reload_failures_.load(std::memory_order_relaxed)};
}

CoordinatorServer::TlsReloadStats CoordinatorServer::tls_reload_stats() const {
  return TlsReloadStats{tls_reloads_.load(std::memory_order_relaxed),
                        tls_reload_failures_.load(std::memory_order_relaxed),
                        tls_certificate_not_after_.load(std::memory_order_relaxed)};
}

Status CoordinatorServer::Start() {
  Webserver::Options http = options_.http;
  if (const int32_t slice_us = options_.long_query.slice_us; slice_us > 0) {
    http.on_io_thread_start = [slice_us] {
      if (!SetOwnSchedulerSlice(slice_us)) {
        LOG_FIRST_N(WARNING, 1) << "HTTP I/O threads cannot ask for a " << slice_us
                                << " us scheduler slice (--scheduler_slice_us): "
                                << std::strerror(errno) << "; they keep the kernel's default";
      }
    };
    LOG(INFO) << "HTTP I/O threads and the executors of short queries ask the kernel for a "
              << slice_us << " us scheduler slice (--scheduler_slice_us), so that they "
              << "preempt long queries when they wake (Linux 6.12 and later)";
  }
  if (options_.long_query.after_ms > 0 && options_.long_query.nice_increment > 0) {
    LOG(INFO) << (NiceIsLocalToProcess()
                      ? "Long queries' lower CPU priority (--long_query_policy) weighs against "
                        "this daemon's own threads only (it leads its own session and the "
                        "kernel groups scheduling by session)"
                      : "Long queries' lower CPU priority (--long_query_policy) weighs against "
                        "every process of this session, not only this daemon's threads, so a "
                        "busy neighbour starves them: on a shared host start coordinatord in a "
                        "session of its own (setsid, or as a systemd service)");
  }
  QR_RETURN_IF_ERROR(ConfigureSecurity(&http));
  QR_RETURN_IF_ERROR(ConfigureResources());
  if (options_.database.empty()) {
    QR_RETURN_IF_ERROR(EnsureSampleDatabase(options_.data_dir, options_.sample_scale_factor,
                                         &database_path_));
  } else {
    database_path_ = options_.database;
  }
  exec_mgr_ = std::make_unique<QueryExecMgr>(options_.coordinator.num_shards > 0
                                                 ? options_.coordinator.num_shards
                                                 : FLAGS_registry_num_shards);
  SqliteEngine::Options engine_options;
  engine_options.database_path = database_path_;
  engine_options.catalog_name = options_.catalog_name;
  engine_options.num_threads = options_.num_query_threads;
  engine_options.spill_budget = spill_budget_.get();
  engine_options.query_spill_limit_bytes = options_.query_max_spill_bytes;
  engine_options.spool_dir = spill_dir_;
  engine_options.long_query = options_.long_query;
  engine_options.max_long_queries_per_user = options_.max_long_queries_per_user;
  engine_options.max_value_bytes = options_.max_value_bytes;
  // The authority the statement service falls back to (IPv6 literals need brackets).
  const std::string& host = options_.http.bind_address;
  const std::string authority =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
      std::to_string(options_.http.port);
  runtime_tables_ = std::make_unique<CoordinatorRuntimeTables>();
  engine_options.system_tables = runtime_tables_.get();
  QR_RETURN_IF_ERROR(SqliteEngine::Create(engine_options, &engine_));
  QueryCoordinator::Options coordinator_options = options_.coordinator;
  coordinator_options.exec_defaults.memory_budget = result_memory_.get();
  coordinator_options.exec_defaults.max_memory_bytes = options_.query_max_memory_bytes;
  std::vector<ClientRequestStatePtr> restored;
  QR_RETURN_IF_ERROR(OpenHistory(&restored));
  coordinator_options.history = history_.get();
  coordinator_ = std::make_unique<QueryCoordinator>(coordinator_options, exec_mgr_.get(),
                                                    engine_.get());
  coordinator_->RestoreCompleted(std::move(restored));
  runtime_tables_->set_coordinator(coordinator_.get());
  webserver_ = std::make_unique<Webserver>(std::move(http));
  StatementService::Options protocol = options_.protocol;
  protocol.fallback_authority = authority;
  protocol.max_header_bytes = options_.http.max_header_bytes;
  statement_service_ =
      std::make_unique<StatementService>(protocol, coordinator_.get(), webserver_.get(),
                                         access_control_.get());
  if (!options_.cluster.endpoints.empty()) {
    Forwarder::Options f;
    f.timeout = options_.forward_timeout;
    f.max_idle_per_member = options_.forward_pool_size;
    f.secret = cluster_secret_;
    f.authentication = authenticator_ != nullptr;
    f.cluster_name = options_.cluster.cluster_name;
    f.tls_context = cluster_tls_context_;
    forwarder_ = std::make_unique<Forwarder>(std::move(f));
    statement_service_->set_forwarder(forwarder_.get());
    if (authenticator_ != nullptr && cluster_secret_.empty()) {
      LOG(WARNING) << "Clustered with authentication but no --cluster_secret_file: the "
                      "cluster view is off (/queries, /v1/query and system.runtime.queries "
                      "list this member's queries only)";
    } else {
      cluster_view_ = std::make_unique<ClusterView>(
          ClusterView::Options{options_.cluster_view_timeout}, forwarder_.get());
      statement_service_->set_cluster_view(cluster_view_.get());
      runtime_tables_->set_cluster_view(cluster_view_.get(), webserver_.get());
      RegisterClusterViewHandlers(this);
    }
  }
  statement_service_->RegisterHandlers();
  PageWorkers::Options list_workers = options_.queries_list;
  list_workers.name = "qr-list";
  queries_list_workers_ = std::make_unique<PageWorkers>(std::move(list_workers));
  RegisterDebugPages(debug_pages::Options(), this);
  QR_RETURN_IF_ERROR(webserver_->Start());
  // With --port 0 the port is known only now.
  const std::string bound = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                            ":" + std::to_string(webserver_->port());
  runtime_tables_->set_node(bound, std::string(scheme()) + "://" + bound);
  StartMembership(bound);
  LOG(INFO) << "coordinatord serving " << database_path_ << " on " << scheme() << "://"
            << options_.http.bind_address << ":" << webserver_->port() << " with "
            << options_.num_query_threads << " query threads";
  return Status::OK();
}

Status CoordinatorServer::ConfigureEtcdTls() {
  Options& o = options_;
  const bool tls_endpoint =
      std::any_of(o.cluster.endpoints.begin(), o.cluster.endpoints.end(),
                  [](const std::string& e) { return IsTlsEtcdEndpoint(e); });
  const bool files = !o.etcd_tls.ca_file.empty() || !o.etcd_tls.client_cert_file.empty() ||
                     !o.etcd_tls.client_key_file.empty();
  if (files && !tls_endpoint) {
    // Plain HTTP to etcd while the operator believes it is TLS would be worse than failing.
    return InvalidArgument(
        "--etcd_ca_file, --etcd_client_cert_file and --etcd_client_key_file apply to "
        "https:// endpoints, and --etcd_endpoints names none");
  }
  if (!tls_endpoint) return Status::OK();
  o.etcd_tls.flag_prefix = "etcd";
  // Checked here, so a bad file stops the start; Membership builds a context per client.
  std::shared_ptr<boost::asio::ssl::context> checked;
  QR_RETURN_IF_ERROR(CreateClusterTlsContext(o.etcd_tls, &checked));
  o.cluster.etcd_tls = o.etcd_tls;
  return Status::OK();
}

void CoordinatorServer::StartMembership(const std::string& bound) {
  if (options_.cluster.endpoints.empty()) return;
  Membership::Options o = options_.cluster;
  if (o.advertised_uri.empty()) o.advertised_uri = std::string(scheme()) + "://" + bound;
  o.version = QR_VERSION;
  o.start_time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  LOG(INFO) << "Cluster " << o.cluster_name << ": joining through etcd at "
            << o.endpoints.front() << (o.endpoints.size() > 1 ? " (and others)" : "") << " as "
            << o.advertised_uri;
  membership_ = std::make_unique<Membership>(std::move(o));
  membership_->set_on_member_id([c = coordinator_.get()](uint32_t id) { c->set_member_id(id); });
  runtime_tables_->set_membership(membership_.get());
  if (forwarder_) forwarder_->set_membership(membership_.get());
  if (cluster_view_) cluster_view_->set_membership(membership_.get());
  membership_->Start();
  // Release: a request that sees it sees a started membership. Before, the HTTP threads read
  // membership_ while this thread assigned it (ThreadSanitizer: /metrics polled at start-up).
  membership_view_.store(membership_.get(), std::memory_order_release);
}

int CoordinatorServer::Shutdown(int64_t grace_ms) {
  if (shut_down_) return 0;
  shut_down_ = true;
  int canceled = coordinator_ ? coordinator_->Shutdown(grace_ms) : 0;
  // Leave the cluster once no query of ours runs (revokes the lease: the others see it now).
  if (membership_) membership_->Stop();
  // Stop serving before the coordinator goes away: no handler may run against freed state.
  // First let the requests under way be answered (the last answers of queries, FINISHED or
  // canceled), closing each connection after its answer.
  if (webserver_) {
    if (options_.shutdown_drain.count() > 0) webserver_->Drain(options_.shutdown_drain);
    webserver_->Stop();
  }
  // Listings still queued are dropped (their answers could no longer be sent).
  if (queries_list_workers_) queries_list_workers_->Stop();
  // Its idle connections are sockets of the webserver's io_contexts, destroyed below.
  if (forwarder_) forwarder_->Close();
  // Then the verification threads: their late callbacks find the webserver stopped.
  if (authenticator_) authenticator_->Stop();
  // The engine before the coordinator: executor threads still finishing (canceled) queries
  // call the coordinator back through their result buffers until they are joined.
  engine_.reset();  // joins the executor threads; they release their query references
  membership_view_.store(nullptr, std::memory_order_release);
  membership_.reset();  // after the executors: system.runtime.nodes reads it
  coordinator_.reset();
  history_.reset();  // writes and syncs the last records
  if (exec_mgr_ && !exec_mgr_->WaitForDrain(10000)) {
    LOG(WARNING) << exec_mgr_->num_live() << " executor query states still live at exit";
  }
  statement_service_.reset();
  webserver_.reset();
  return canceled;
}

}  // namespace qr
