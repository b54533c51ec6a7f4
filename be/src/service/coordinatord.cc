// coordinatord: a query coordinator daemon speaking the Trino client REST protocol over an
// embedded, read-only SQLite engine. See README.md and docs/operations.md.

#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "cluster/etcd-client.h"
#include "service/coordinator-server.h"
#include "service/coordinatord-flags.h"
#include "service/coordinatord-help.h"
#include "service/query-history.h"
#include "service/version.h"
#include "http/file-limit.h"

namespace qr {
namespace {

/// The CPUs this process may run on (its affinity mask: a container's cpuset, taskset).
int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

CoordinatorServer::Options OptionsFromFlags() {
  CoordinatorServer::Options o;
  o.database = FLAGS_database;
  o.catalog_name = FLAGS_catalog_name;
  o.data_dir = FLAGS_data_dir;
  o.sample_scale_factor = FLAGS_sample_scale_factor;
  o.num_query_threads =
      FLAGS_num_query_threads > 0 ? FLAGS_num_query_threads : FLAGS_max_running_queries;
  o.long_query.after_ms = FLAGS_long_query_after_ms;
  o.long_query.nice_increment = FLAGS_long_query_nice;
  o.long_query.policy = FLAGS_long_query_policy == "idle" ? qr::LongQueryDemoter::Policy::kIdle
                                                          : qr::LongQueryDemoter::Policy::kNice;
  o.long_query.slice_us = FLAGS_scheduler_slice_us;
  o.long_query.yield_us = FLAGS_long_query_yield_us;
  o.max_long_queries_per_user =
      FLAGS_max_long_queries_per_user > 0 ? FLAGS_max_long_queries_per_user : AvailableCpus();
  o.max_result_memory_bytes = FLAGS_max_result_memory_mb << 20;
  o.query_max_memory_bytes = FLAGS_query_max_memory_mb << 20;
  o.sqlite_heap_limit_bytes = FLAGS_sqlite_heap_limit_mb << 20;
  o.max_value_bytes = int64_t{FLAGS_max_value_mb} << 20;
  o.spill_dir = FLAGS_spill_dir;
  o.max_spill_bytes = FLAGS_max_spill_mb << 20;
  o.query_max_spill_bytes = FLAGS_query_max_spill_mb << 20;
  o.metrics_per_shard = FLAGS_metrics_per_shard;
  o.queries_list.threads = FLAGS_queries_list_threads;
  o.queries_list.max_pending = static_cast<size_t>(FLAGS_queries_list_max_pending);
  o.http.bind_address = FLAGS_http_bind_address;
  o.http.port = FLAGS_http_port;
  o.http.num_threads = FLAGS_num_http_threads;
  o.http.idle_timeout = std::chrono::seconds(FLAGS_http_idle_timeout_s);
  o.http.max_body_bytes = static_cast<size_t>(FLAGS_max_statement_bytes);
  o.http.max_header_bytes = static_cast<size_t>(FLAGS_max_header_bytes);
  o.http.max_connections = FLAGS_max_connections;
  o.http.max_connections_per_address = FLAGS_max_connections_per_address;
  o.coordinator.max_running_queries = FLAGS_max_running_queries;
  o.coordinator.max_queued_queries = FLAGS_max_queued_queries;
  o.coordinator.idle_query_timeout_ms = int64_t{FLAGS_idle_query_timeout_s} * 1000;
  o.coordinator.max_in_flight_queries = FLAGS_max_in_flight_queries;
  o.coordinator.max_in_flight_queries_per_user = FLAGS_max_in_flight_queries_per_user;
  o.coordinator.max_running_queries_per_user = FLAGS_max_running_queries_per_user;
  o.coordinator.abandoned_query_timeout_ms = int64_t{FLAGS_abandoned_query_timeout_s} * 1000;
  o.coordinator.shutdown_client_idle_ms = int64_t{FLAGS_shutdown_client_idle_s} * 1000;
  o.shutdown_drain = std::chrono::seconds(FLAGS_shutdown_drain_s);
  o.coordinator.exec_time_limit_ms = int64_t{FLAGS_exec_time_limit_s} * 1000;
  o.coordinator.max_page_retries = FLAGS_max_page_retries;
  o.coordinator.max_failed_queries_per_user_per_s = FLAGS_max_failed_queries_per_user_per_s;
  o.coordinator.query_log_size = FLAGS_query_log_size;
  o.history.dir = FLAGS_query_history_dir;
  ParseHistorySyncMode(FLAGS_query_history_sync, &o.history.sync);  // validated
  o.history.sync_interval_ms = FLAGS_query_history_sync_interval_ms;
  o.history.segment_bytes = int64_t{FLAGS_query_history_segment_mb} << 20;
  o.history.max_age_s = FLAGS_query_history_max_age_s;
  o.history.max_segments = FLAGS_query_history_max_segments;
  o.history.max_total_bytes = std::min<int64_t>(FLAGS_query_history_max_mb, int64_t{1} << 40)
                              << 20;
  o.history.queue_capacity = static_cast<size_t>(FLAGS_query_history_queue_size);
  o.protocol.default_user = FLAGS_default_user;
  o.protocol.trust_forwarded_headers = FLAGS_http_trust_forwarded_headers;
  o.http_trusted_proxies = FLAGS_http_trusted_proxies;
  o.http_allowed_hosts = FLAGS_http_allowed_hosts;
  o.protocol.max_session_properties = FLAGS_max_session_properties;
  o.admin_users = FLAGS_admin_users;
  o.auth_password_file = FLAGS_auth_password_file;
  o.allow_insecure_auth = FLAGS_allow_insecure_auth;
  o.auth.max_failures = FLAGS_auth_max_failures;
  o.auth.failure_window = std::chrono::seconds(FLAGS_auth_failure_window_s);
  o.auth.verify_threads = FLAGS_auth_verify_threads;
  o.auth.max_pending_verifications = static_cast<size_t>(FLAGS_auth_max_pending_verifications);
  o.tls_cert_file = FLAGS_tls_cert_file;
  o.tls_key_file = FLAGS_tls_key_file;
  if (!FLAGS_etcd_endpoints.empty()) {
    (void)ParseEtcdEndpoints(FLAGS_etcd_endpoints, &o.cluster.endpoints);  // validated
  }
  o.cluster.cluster_name = FLAGS_cluster_name;
  o.cluster.advertised_uri = FLAGS_advertised_uri;
  o.cluster.lease_ttl_s = FLAGS_cluster_lease_ttl_s;
  o.cluster.max_member_id = static_cast<uint32_t>(FLAGS_cluster_max_members);
  o.cluster.request_timeout = std::chrono::milliseconds(FLAGS_etcd_request_timeout_ms);
  o.forward_timeout = std::chrono::milliseconds(FLAGS_cluster_forward_timeout_ms);
  o.forward_pool_size = static_cast<size_t>(FLAGS_cluster_forward_pool_size);
  o.cluster_view_timeout = std::chrono::milliseconds(FLAGS_cluster_view_timeout_ms);
  o.query_plan_timeout = std::chrono::milliseconds(FLAGS_query_plan_timeout_ms);
  o.cluster_secret_file = FLAGS_cluster_secret_file;
  o.cluster_tls.ca_file = FLAGS_cluster_ca_file;
  o.cluster_tls.client_cert_file = FLAGS_cluster_client_cert_file;
  o.cluster_tls.client_key_file = FLAGS_cluster_client_key_file;
  o.etcd_tls.ca_file = FLAGS_etcd_ca_file;
  o.etcd_tls.client_cert_file = FLAGS_etcd_client_cert_file;
  o.etcd_tls.client_key_file = FLAGS_etcd_client_key_file;
  return o;
}

/// Checks that involve several flags or the file system; false after printing why.
bool CheckFlags() {
  const int32_t threads =
      FLAGS_num_query_threads > 0 ? FLAGS_num_query_threads : FLAGS_max_running_queries;
  if (threads > kMaxThreads) {
    fprintf(stderr,
            "coordinatord: %d executor threads (%s) is more than %d: set --num_query_threads "
            "to at most %d (queries beyond the threads wait for one)\n",
            threads,
            FLAGS_num_query_threads > 0 ? "--num_query_threads" : "--max_running_queries",
            kMaxThreads, kMaxThreads);
    return false;
  }
  if (!FLAGS_query_history_dir.empty() && FLAGS_query_history_max_mb > 0 &&
      FLAGS_query_history_max_mb < FLAGS_query_history_segment_mb) {
    // Each rotation would delete the segment it closed: the history would hold at most the
    // open segment, and a restart would start from nothing.
    fprintf(stderr,
            "coordinatord: --query_history_max_mb=%lld is less than one segment "
            "(--query_history_segment_mb=%d): every closed segment would be deleted at once; "
            "raise --query_history_max_mb or lower --query_history_segment_mb\n",
            static_cast<long long>(FLAGS_query_history_max_mb), FLAGS_query_history_segment_mb);
    return false;
  }
  if (!FLAGS_log_dir.empty()) {
    // glog would otherwise fall back to no log file at all, silently.
    std::string probe = FLAGS_log_dir + "/.coordinatord-log-probe.XXXXXX";
    int fd = mkstemp(probe.data());
    bool ok = fd >= 0 && write(fd, "probe\n", 6) == 6;
    const int err = errno;
    if (fd >= 0) {
      close(fd);
      unlink(probe.c_str());
    }
    if (!ok) {
      fprintf(stderr, "coordinatord: cannot write log files in --log_dir=%s: %s\n",
              FLAGS_log_dir.c_str(), strerror(err));
      return false;
    }
  }
  return true;
}

/// Descriptors the daemon needs besides its connections: the database per executor, spool
/// and temporary files, logs, the password file.
constexpr uint64_t kFileReserve = 256;

/// Raises the soft open-file limit to the hard one (a shell's 256 or 1024 would cap the
/// connections far below --max_connections) and says whether it is enough.
void RaiseOpenFileLimit() {
  FileLimit limit;
  Status s = RaiseFileLimit(&limit);
  if (!s.ok()) {
    LOG(WARNING) << s.message();
  } else if (limit.soft != limit.soft_before) {
    LOG(INFO) << "Open file limit raised from " << limit.soft_before << " to " << limit.soft
              << " (the hard limit)";
  } else {
    LOG(INFO) << "Open file limit: " << limit.soft << " (hard limit " << limit.hard << ")";
  }
  const uint64_t wanted = static_cast<uint64_t>(FLAGS_max_connections) + kFileReserve;
  if (limit.soft < wanted) {
    LOG(WARNING) << "The open file limit (" << limit.soft << ") is below --max_connections ("
                 << FLAGS_max_connections << ") plus " << kFileReserve << " for files: out of "
                 << "descriptors, new connections get 503. Raise the hard limit (systemd: "
                 << "LimitNOFILE=; ulimit -Hn) or lower --max_connections";
  }
}

int Main() {
  RaiseOpenFileLimit();
  // Block the stop signals in every thread (threads inherit the mask) and take them
  // synchronously below: no async-signal-safety concerns, no polling.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // Re-reads the password file and the TLS files.
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  CoordinatorServer server(OptionsFromFlags());
  Status s = server.Start();
  if (!s.ok()) {
    LOG(ERROR) << "coordinatord failed to start: " << s.message();
    fprintf(stderr, "coordinatord: %s\n", s.message().c_str());
    return 1;
  }
  printf("coordinatord listening on %s://%s:%d (database %s)\n", server.scheme(),
         FLAGS_http_bind_address.c_str(), server.port(), server.database_path().c_str());
  fflush(stdout);

  int sig = 0;
  for (sigwait(&stop_signals, &sig); sig == SIGHUP; sigwait(&stop_signals, &sig)) {
    if (server.authenticator() == nullptr && !server.tls_enabled() &&
        !server.cluster_client_tls_enabled()) {
      LOG(INFO) << "SIGHUP ignored: nothing to reload (no --auth_password_file, no "
                << "--tls_cert_file, not clustered)";
      continue;
    }
    // Each reload logs its failure (the old files stay in use) and, where the reload itself
    // does not, its success.
    const auto report = [](const Status& s, const char* done, const char* failed) {
      if (!s.ok()) {
        LOG(ERROR) << failed << s.message();
      } else if (done != nullptr) {
        LOG(INFO) << done;
      }
    };
    if (server.authenticator() != nullptr) {
      report(server.ReloadPasswordFile(), nullptr,
             "Password file not reloaded (the old users stay): ");
    }
    if (server.tls_enabled()) {  // Logs "Now serving TLS certificate ..." itself.
      report(server.ReloadTlsCertificate(), nullptr,
             "TLS certificate not reloaded (new connections still get the old one): ");
    }
    if (server.cluster_client_tls_enabled()) {
      report(server.ReloadClusterClientTls(),
             "Reloaded the TLS files for connections to other members (--cluster_ca_file, "
             "--cluster_client_cert_file): new connections use them",
             "Cluster TLS files not reloaded (new connections to members still use the old "
             "ones): ");
    }
    if (server.etcd_client_tls_enabled()) {
      report(server.ReloadEtcdClientTls(),
             "Reloaded the TLS files for etcd (--etcd_ca_file, --etcd_client_cert_file): new "
             "connections to etcd use them",
             "etcd TLS files not reloaded (new connections to etcd still use the old ones): ");
    }
  }
  LOG(INFO) << "Received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", shutting down";
  int canceled = server.Shutdown(int64_t{FLAGS_shutdown_grace_period_s} * 1000);
  LOG(INFO) << "coordinatord stopped (" << canceled << " queries canceled at shutdown)";
  return 0;
}

}  // namespace
}  // namespace qr

int main(int argc, char** argv) {
  // While TZ is unset, glibc stats /etc/localtime on every localtime call: one syscall per log
  // line, two per query (docs/benchmarks.md, "Per-query log lines"). Naming the same file
  // makes it read once; a changed /etc/localtime is then seen at the next start. Before any
  // thread exists (setenv is not thread-safe); an operator's TZ is kept.
  setenv("TZ", ":/etc/localtime", /*overwrite=*/0);
  gflags::SetUsageMessage("coordinatord [flags]: Trino-protocol query coordinator over SQLite");
  gflags::SetVersionString(QR_FULL_VERSION);
  // --help, --helpshort and --version are ours (flags grouped, glog's last); gflags keeps
  // --helpfull, --helpxml, --helpon and --helpmatch.
  gflags::ParseCommandLineNonHelpFlags(&argc, &argv, true);
  if (qr::HandleHelpAndVersionFlags(QR_FULL_VERSION)) return 0;
  gflags::HandleCommandLineHelpFlags();
  // Blocks of 1 MiB and more (a wide value SQLite expands, a large page) are mapped and
  // unmapped on their own, so the memory budgets are budgets of RSS too. glibc's default
  // raises this threshold after each such free (up to 32 MiB), after which freed blocks stay
  // in the heaps of the executor threads' arenas: a burst of 16 MiB values left ~450 MiB of
  // RSS behind.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  if (!qr::CheckFlags()) return 1;
  FLAGS_logtostderr = FLAGS_logtostderr || FLAGS_log_dir.empty();
  // Every line reaches the log file when it is logged, not up to --logbufsecs later: the
  // submit, cancel and login-failure lines are the audit trail, and a crash must not lose
  // them (one write(2) per line).
  gflags::CommandLineFlagInfo logbuflevel;
  if (gflags::GetCommandLineFlagInfo("logbuflevel", &logbuflevel) && logbuflevel.is_default) {
    FLAGS_logbuflevel = -1;
  }
  google::InitGoogleLogging(argv[0]);
  return qr::Main();
}
