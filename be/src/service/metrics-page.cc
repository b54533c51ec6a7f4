// GET /metrics: the Prometheus text exposition format, version 0.0.4. Every family is written
// as '# HELP', '# TYPE', then all of its samples, as the format requires. Reading the numbers
// takes no registry lock (per-shard statistics are published atomics).


#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/query-exec-mgr.h"
#include "runtime/query-runner.h"
#include "runtime/spool-file.h"
#include "runtime/sqlite-connection.h"
#include "runtime/sqlite-heap.h"
#include "runtime/step-checkpoint.h"
#include "service/coordinator-server.h"
#include "service/debug-pages.h"
#include "service/metrics-format.h"
#include "service/query-coordinator.h"
#include "http/webserver.h"

namespace qr {
namespace debug_pages {
namespace {

using metrics::Family;
using metrics::Sample;
using metrics::Scalar;

/// Milliseconds as decimal seconds without trailing zeros: 5 -> "0.005", 30000 -> "30".
std::string MsAsSeconds(int64_t ms) {
  std::string s = std::to_string(ms / 1000);
  int64_t frac = ms % 1000;
  if (frac == 0) return s;
  char buf[8];
  snprintf(buf, sizeof(buf), ".%03" PRId64, frac);
  std::string f = buf;
  while (f.back() == '0') f.pop_back();
  return s + f;
}

void AppendQueryCounters(const QueryCoordinator& coordinator, std::string* out) {
  QueryCoordinator::Metrics m = coordinator.GetMetrics();
  Scalar("qr_queries_submitted_total", "counter", "Queries submitted.", m.submitted, out);
  Scalar("qr_queries_finished_total", "counter", "Queries that finished successfully.",
         m.finished, out);
  Scalar("qr_queries_failed_total", "counter", "Queries that failed (errors, limits, expiry).",
         m.failed, out);
  Scalar("qr_queries_canceled_total", "counter", "Queries canceled by a client or operator.",
         m.canceled, out);
  Scalar("qr_queries_running", "gauge",
         "Queries holding a running slot (--max_running_queries): executing, or waiting for "
         "an executor thread (qr_executor_queue_length).",
         m.running, out);
  Scalar("qr_queries_queued", "gauge", "Queries waiting for an execution slot.", m.queued, out);
  Scalar("qr_queries_in_flight", "gauge", "Queries in the coordinator's registry.",
         m.in_flight, out);
  Scalar("qr_users_in_flight", "gauge", "Users with queries in flight.", m.users_in_flight,
         out);
  Scalar("qr_queries_abandoned_total", "counter",
         "Queries canceled because their clients stopped or never started fetching "
         "(--idle_query_timeout_s, --abandoned_query_timeout_s).",
         m.abandoned, out);
  Family("qr_queries_rejected_total", "counter",
         "Submissions refused with QUERY_QUEUE_FULL, by the limit that refused them.", out);
  Sample("qr_queries_rejected_total", "{limit=\"max_in_flight_queries\"}",
         m.rejected_in_flight, out);
  Sample("qr_queries_rejected_total", "{limit=\"max_in_flight_queries_per_user\"}",
         m.rejected_in_flight_per_user, out);
  Sample("qr_queries_rejected_total", "{limit=\"max_queued_queries\"}", m.rejected_queue_full,
         out);
  Sample("qr_queries_rejected_total", "{limit=\"max_failed_queries_per_user_per_s\"}",
         coordinator.failure_throttle().num_refused(), out);
  Scalar("qr_page_retries_refused_total", "counter",
         "GETs of an already answered nextUri refused with 429 (--max_page_retries).",
         m.page_retries_refused, out);
}

/// The configured limits, so that a dashboard can put use and limit side by side.
void AppendLimits(const CoordinatorServer& server, std::string* out) {
  Family("qr_limit", "gauge", "Configured limits, by flag (0: no limit).", out);
  const QueryCoordinator::Options& o = server.coordinator()->options();
  const CoordinatorServer::Options& so = server.options();
  const std::pair<const char*, int64_t> limits[] = {
      {"max_result_memory_mb", so.max_result_memory_bytes >> 20},
      {"query_max_memory_mb", so.query_max_memory_bytes >> 20},
      {"sqlite_heap_limit_mb", so.sqlite_heap_limit_bytes >> 20},
      {"max_value_mb", so.max_value_bytes >> 20},
      {"max_spill_mb", so.max_spill_bytes >> 20},
      {"query_max_spill_mb", so.query_max_spill_bytes >> 20},
      {"max_running_queries", o.max_running_queries},
      {"max_running_queries_per_user", o.max_running_queries_per_user},
      {"max_queued_queries", o.max_queued_queries},
      {"max_in_flight_queries", o.max_in_flight_queries},
      {"max_in_flight_queries_per_user", o.max_in_flight_queries_per_user},
      {"idle_query_timeout_s", o.idle_query_timeout_ms / 1000},
      {"abandoned_query_timeout_s", o.abandoned_query_timeout_ms / 1000},
      {"max_page_retries", o.max_page_retries},
      {"max_failed_queries_per_user_per_s", o.max_failed_queries_per_user_per_s},
      {"exec_time_limit_s", o.exec_time_limit_ms / 1000},
      {"long_query_after_ms", so.long_query.after_ms},
      {"long_query_nice", so.long_query.nice_increment},
      {"long_query_yield_us", so.long_query.yield_us},
      {"max_long_queries_per_user", so.max_long_queries_per_user},
      {"max_connections", so.http.max_connections},
      {"max_connections_per_address", so.http.max_connections_per_address},
      {"query_plan_timeout_ms", so.query_plan_timeout.count()},
  };
  for (const auto& [flag, value] : limits) {
    Sample("qr_limit", std::string("{flag=\"") + flag + "\"}", value, out);
  }
}

void AppendLatencyHistogram(const QueryCoordinator& coordinator, std::string* out) {
  const char* name = "qr_query_latency_seconds";
  Family(name, "histogram", "Time from submission to completion of queries.", out);
  int64_t sum_ms = 0;
  std::vector<int64_t> cumulative = coordinator.LatencyHistogram(&sum_ms);
  const auto& bounds = QueryCoordinator::kLatencyBucketsMs;
  for (size_t i = 0; i < cumulative.size(); ++i) {
    std::string le = i < bounds.size() ? MsAsSeconds(bounds[i]) : "+Inf";
    Sample("qr_query_latency_seconds_bucket", "{le=\"" + le + "\"}", cumulative[i], out);
  }
  Sample("qr_query_latency_seconds_sum", "", MsAsSeconds(sum_ms), out);
  Sample("qr_query_latency_seconds_count", "", cumulative.empty() ? 0 : cumulative.back(), out);
}

void AppendHttpMetrics(const Webserver& web, std::string* out) {
  Family("qr_http_responses_total", "counter", "HTTP responses sent, by status code.", out);
  for (unsigned code = 100; code <= 599; ++code) {
    uint64_t n = web.responses_with_status(code);
    if (n == 0) continue;
    Sample("qr_http_responses_total", "{code=\"" + std::to_string(code) + "\"}",
           static_cast<int64_t>(n), out);
  }
  Scalar("qr_http_connections_accepted_total", "counter", "HTTP connections accepted.",
         static_cast<int64_t>(web.connections_accepted()), out);
  Scalar("qr_http_connections_open", "gauge", "HTTP connections open.",
         static_cast<int64_t>(web.connections_open()), out);
  Family("qr_http_connections_refused_total", "counter",
         "HTTP connections answered 503 and closed at accept, by limit.", out);
  for (const auto& [limit, label] :
       {std::pair{Webserver::ConnectionLimit::kMaxConnections, "max_connections"},
        std::pair{Webserver::ConnectionLimit::kPerAddress, "max_connections_per_address"},
        std::pair{Webserver::ConnectionLimit::kFileDescriptors, "file_descriptors"}}) {
    Sample("qr_http_connections_refused_total", std::string("{limit=\"") + label + "\"}",
           static_cast<int64_t>(web.connections_refused(limit)), out);
  }
}

/// The per-shard statistics of one registry, read shard by shard.
struct RegistryStats {
  const char* registry;
  std::vector<ShardStats> shards;
  ShardStats total;
  uint64_t largest_shard = 0;
};

template <typename Map>
RegistryStats ReadStats(const char* registry, const Map& map) {
  RegistryStats r{registry, {}, {}, 0};
  r.shards.reserve(map.num_shards());
  for (int i = 0; i < map.num_shards(); ++i) {
    const ShardStats s = map.GetShardStats(i);
    r.total.entries += s.entries;
    r.total.acquisitions += s.acquisitions;
    r.total.shared_acquisitions += s.shared_acquisitions;
    r.total.contended_acquisitions += s.contended_acquisitions;
    r.total.sleeps += s.sleeps;
    r.total.bias_revocations += s.bias_revocations;
    r.largest_shard = std::max(r.largest_shard, s.entries);
    r.shards.push_back(s);
  }
  return r;
}

/// One family with a sample per registry and shard; 'field' picks the statistic.
void ShardFamily(const char* name, const char* type, const char* help,
                 const std::vector<RegistryStats>& registries, uint64_t ShardStats::*field,
                 std::string* out) {
  Family(name, type, help, out);
  for (const RegistryStats& r : registries) {
    for (size_t i = 0; i < r.shards.size(); ++i) {
      std::string labels = std::string("{registry=\"") + r.registry + "\",shard=\"" +
                           std::to_string(i) + "\"}";
      Sample(name, labels, static_cast<int64_t>(r.shards[i].*field), out);
    }
  }
}

/// One family with a sample per registry: 'field' summed over its shards.
void RegistryFamily(const char* name, const char* type, const char* help,
                    const std::vector<RegistryStats>& registries, uint64_t ShardStats::*field,
                    std::string* out) {
  Family(name, type, help, out);
  for (const RegistryStats& r : registries) {
    Sample(name, std::string("{registry=\"") + r.registry + "\"}",
           static_cast<int64_t>(r.total.*field), out);
  }
}

/// How evenly the ids spread: per registry, the number of shards holding at most 'at_most'
/// entries (cumulative; qr_registry_shards is the total).
void AppendShardSizeDistribution(const std::vector<RegistryStats>& registries,
                                 std::string* out) {
  static constexpr uint64_t kBounds[] = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};
  Family("qr_registry_shards_by_entries", "gauge",
         "Shards of a registry holding at most 'at_most' entries (cumulative).", out);
  for (const RegistryStats& r : registries) {
    const std::string prefix = std::string("{registry=\"") + r.registry + "\",at_most=\"";
    for (uint64_t bound : kBounds) {
      int64_t n = 0;
      for (const ShardStats& s : r.shards) n += s.entries <= bound;
      Sample("qr_registry_shards_by_entries", prefix + std::to_string(bound) + "\"}", n, out);
    }
  }
}

void AppendRegistryMetrics(const QueryCoordinator& coordinator, const QueryExecMgr& exec,
                           bool per_shard, std::string* out) {
  std::vector<RegistryStats> registries = {ReadStats("coordinator", coordinator.registry()),
                                           ReadStats("executor", exec.registry())};
  RegistryFamily("qr_registry_entries", "gauge", "Entries in a registry.", registries,
                 &ShardStats::entries, out);
  Family("qr_registry_largest_shard_entries", "gauge", "Entries in a registry's fullest shard.",
         out);
  for (const RegistryStats& r : registries) {
    Sample("qr_registry_largest_shard_entries", std::string("{registry=\"") + r.registry + "\"}",
           static_cast<int64_t>(r.largest_shard), out);
  }
  Family("qr_registry_shards", "gauge", "Shards of a registry (--registry_num_shards).", out);
  for (const RegistryStats& r : registries) {
    Sample("qr_registry_shards", std::string("{registry=\"") + r.registry + "\"}",
           static_cast<int64_t>(r.shards.size()), out);
  }
  AppendShardSizeDistribution(registries, out);
  RegistryFamily("qr_registry_lock_acquisitions_total", "counter",
                 "Acquisitions of a registry's shard locks.", registries,
                 &ShardStats::acquisitions, out);
  RegistryFamily("qr_registry_lock_shared_acquisitions_total", "counter",
                 "Shared acquisitions (lookups) of a registry's shard locks through their "
                 "reader slots, included in qr_registry_lock_acquisitions_total (read-biased "
                 "ones are in qr_shard_lock_biased_reads_total).",
                 registries, &ShardStats::shared_acquisitions, out);
  RegistryFamily("qr_registry_lock_bias_revocations_total", "counter",
                 "Times a writer found a registry's shard lock read-biased and revoked the "
                 "bias (a membarrier() system call each, or one for a whole walk).",
                 registries, &ShardStats::bias_revocations, out);
  Scalar("qr_shard_lock_membarriers_total", "counter",
         "membarrier() system calls made to revoke the read bias of shard locks of the "
         "process.",
         static_cast<int64_t>(ShardLock::read_bias_fences()), out);
  Scalar("qr_shard_lock_membarrier_fallbacks_total", "counter",
         "Of those, barriers made with mprotect() because membarrier() was refused after "
         "start-up (a seccomp filter installed since).",
         static_cast<int64_t>(ShardLock::read_bias_fallback_fences()), out);
  Scalar("qr_shard_lock_biased_reads_total", "counter",
         "Read-biased shared acquisitions of every shard lock of the process (lookups that "
         "took no reader slot).",
         static_cast<int64_t>(ShardLock::biased_reads()), out);
  RegistryFamily("qr_registry_lock_contended_acquisitions_total", "counter",
                 "Acquisitions of a registry's shard locks that found the lock held.",
                 registries, &ShardStats::contended_acquisitions, out);
  RegistryFamily("qr_registry_lock_sleeps_total", "counter",
                 "Times a thread slept in the kernel waiting for a registry's shard lock.",
                 registries, &ShardStats::sleeps, out);
  if (per_shard) {
    ShardFamily("qr_registry_shard_entries", "gauge", "Entries in a registry shard.",
                registries, &ShardStats::entries, out);
    ShardFamily("qr_registry_shard_lock_acquisitions_total", "counter",
                "Acquisitions of a registry shard's lock.", registries,
                &ShardStats::acquisitions, out);
    ShardFamily("qr_registry_shard_lock_shared_acquisitions_total", "counter",
                "Shared acquisitions (lookups) of a registry shard's lock through its reader "
                "slots, included in qr_registry_shard_lock_acquisitions_total.",
                registries, &ShardStats::shared_acquisitions, out);
    ShardFamily("qr_registry_shard_contended_acquisitions_total", "counter",
                "Acquisitions of a registry shard's lock that found it held.", registries,
                &ShardStats::contended_acquisitions, out);
    ShardFamily("qr_registry_shard_lock_sleeps_total", "counter",
                "Times a thread slept in the kernel waiting for a registry shard's lock.",
                registries, &ShardStats::sleeps, out);
  }
  Scalar("qr_executor_queries_live", "gauge", "Executor-side query states alive.",
         exec.num_live(), out);
  Scalar("qr_executor_queries_created_total", "counter", "Executor-side query states created.",
         exec.num_created(), out);
  Scalar("qr_executor_queries_released_total", "counter",
         "Executor-side query states released (last reference dropped).", exec.num_released(),
         out);
  Scalar("qr_executor_state_memory_bytes", "gauge",
         "Memory the executor's registry holds for query states: 2 MiB slabs, kept while the "
         "daemon runs (the peak of live queries, about 1,927 states a slab).",
         static_cast<int64_t>(exec.registry().NodeBytes()), out);
  Scalar("qr_coordinator_requests_live", "gauge",
         "Client requests alive: in flight, in the completed-query log, or still referenced.",
         ClientRequestStatePtr::Live(), out);
  Scalar("qr_coordinator_request_memory_bytes", "gauge",
         "Memory the process holds for client requests: 2 MiB slabs, kept while the daemon "
         "runs (the peak of live requests).",
         static_cast<int64_t>(ClientRequestStatePtr::NodeBytes()), out);
}

/// Use of the memory and disk budgets, next to their limits in qr_limit.
void AppendResourceMetrics(const CoordinatorServer& server, std::string* out) {
  const MemoryBudget& mem = *server.result_memory();
  Scalar("qr_result_memory_bytes", "gauge",
         "Encoded query results held in memory (--max_result_memory_mb).", mem.used_bytes(), out);
  Scalar("qr_result_memory_peak_bytes", "gauge", "Highest qr_result_memory_bytes so far.",
         mem.peak_bytes(), out);
  Scalar("qr_result_memory_refusals_total", "counter",
         "Reservations of result memory refused by --max_result_memory_mb.", mem.refusals(),
         out);
  Scalar("qr_sqlite_heap_bytes", "gauge", "SQLite's heap in use (--sqlite_heap_limit_mb).",
         SqliteHeapUsed(), out);
  Scalar("qr_sqlite_heap_peak_bytes", "gauge", "Highest qr_sqlite_heap_bytes so far.",
         SqliteHeapPeak(), out);
  Scalar("qr_sqlite_heap_refusals_total", "counter",
         "Allocations of SQLite refused by --sqlite_heap_limit_mb (its statement fails with "
         "EXCEEDED_GLOBAL_MEMORY_LIMIT).",
         SqliteHeapRefusals(), out);
  Scalar("qr_value_limit_refusals_total", "counter",
         "Statements failed by a value or row larger than --max_value_mb.",
         ValueLimitRefusals(), out);
  const SpillBudget& spill = *server.spill_budget();
  Scalar("qr_spill_bytes", "gauge", "Bytes of SQLite temporary files of running queries.",
         spill.used_bytes(), out);
  Scalar("qr_spill_peak_bytes", "gauge", "Highest qr_spill_bytes so far.", spill.peak_bytes(),
         out);
  Family("qr_spill_refusals_total", "counter",
         "Temporary-file writes refused, by the limit that refused them.", out);
  Sample("qr_spill_refusals_total", "{limit=\"max_spill_mb\"}", spill.refusals(), out);
  Sample("qr_spill_refusals_total", "{limit=\"query_max_spill_mb\"}", spill.query_refusals(),
         out);
  const SqliteEngine& engine = *server.engine();
  Scalar("qr_executor_queue_length", "gauge",
         "Admitted queries (holding a running slot, in qr_queries_running) waiting for an "
         "executor thread.",
         engine.num_queued(), out);
  Scalar("qr_executor_threads_busy", "gauge", "Executor threads running a statement.",
         engine.num_running(), out);
  Scalar("qr_queries_demoted_total", "counter",
         "Queries whose executor thread got a lower CPU priority for running longer than "
         "--long_query_after_ms.",
         engine.num_demoted(), out);
  Scalar("qr_long_query_parks_total", "counter",
         "Long queries that waited for a turn because their user already had "
         "--max_long_queries_per_user long queries running.",
         engine.num_long_query_parks(), out);
  Scalar("qr_long_queries_parked", "gauge",
         "Long queries waiting for a turn (--max_long_queries_per_user), holding their slot "
         "and executor but no CPU.",
         engine.num_long_queries_parked(), out);
  Scalar("qr_long_query_yields_total", "counter",
         "Times the executor of a query yielded the CPU to waiting threads, every "
         "--long_query_yield_us of the query's run.",
         LongQueryYields(), out);
  Scalar("qr_statement_stop_allocations_refused_total", "counter",
         "Allocations of SQLite refused because their statement had been canceled or had run "
         "past its time limit: how a row of SQLite's own calls stops between two of them.",
         StepCheckpoint::AllocationsRefused(), out);
  Scalar("qr_statement_deadline_interrupts_total", "counter",
         "Statements interrupted by the deadline watchdog at their query's time limit "
         "(--exec_time_limit_s), wherever they were.",
         engine.num_deadline_interrupts(), out);
  Scalar("qr_executor_threads_replaced_total", "counter",
         "Executor threads replaced because they could not get their CPU priority back after "
         "a long query (no CAP_SYS_NICE or RLIMIT_NICE).",
         engine.num_executors_replaced(), out);
  Scalar("qr_query_plan_timeouts_total", "counter",
         "EXPLAINs of the per-query page's plan (/query_plan) failed with EXCEEDED_TIME_LIMIT "
         "by --query_plan_timeout_ms.",
         server.query_plan_timeouts(), out);
  SpoolFile::Stats& spool = SpoolFile::stats();
  Scalar("qr_spool_files_total", "counter",
         "Result spool files opened (queries whose results outgrew their memory buffer).",
         spool.files.load(std::memory_order_relaxed), out);
  Scalar("qr_spool_write_calls_total", "counter", "pwritev() calls writing result spool files.",
         spool.write_calls.load(std::memory_order_relaxed), out);
  Scalar("qr_spool_written_bytes_total", "counter", "Bytes written to result spool files.",
         spool.bytes_written.load(std::memory_order_relaxed), out);
  Scalar("qr_spool_read_calls_total", "counter", "pread() calls reading result spool files.",
         spool.read_calls.load(std::memory_order_relaxed), out);
  Scalar("qr_spool_read_bytes_total", "counter", "Bytes read back from result spool files.",
         spool.bytes_read.load(std::memory_order_relaxed), out);
  Scalar("qr_spool_punched_bytes_total", "counter",
         "Bytes of result spool files punched out (fallocate) after being read, their spill "
         "quota given back.",
         spool.bytes_punched.load(std::memory_order_relaxed), out);
  Scalar("qr_spool_quota_waits_total", "counter",
         "Times an executor waited for a client because a spill quota refused a spooled page.",
         spool.quota_waits.load(std::memory_order_relaxed), out);
}

/// Only with TLS on (--tls_cert_file).
void AppendTlsMetrics(const CoordinatorServer::TlsReloadStats& tls, std::string* out) {
  Family("qr_tls_certificate_reloads_total", "counter",
         "Reloads of --tls_cert_file and --tls_key_file (SIGHUP), by result; a failed one "
         "leaves the previous certificate in use.",
         out);
  Sample("qr_tls_certificate_reloads_total", "{result=\"ok\"}",
         static_cast<int64_t>(tls.reloads), out);
  Sample("qr_tls_certificate_reloads_total", "{result=\"failed\"}",
         static_cast<int64_t>(tls.failures), out);
  Scalar("qr_tls_certificate_expiry_timestamp_seconds", "gauge",
         "The notAfter time of the TLS certificate new connections get, in seconds since the "
         "Unix epoch.",
         tls.not_after_unix_seconds, out);
}

/// Only in a cluster: the member's TLS files as a client of the other members and of etcd.
void AppendClientTlsMetrics(const CoordinatorServer& server, std::string* out) {
  const CoordinatorServer::ClientTlsReloadStats s = server.client_tls_reload_stats();
  Family("qr_client_tls_reloads_total", "counter",
         "Reloads (SIGHUP) of the TLS files this member uses as a client: target=\"cluster\" "
         "(--cluster_ca_file, --cluster_client_cert_file) and target=\"etcd\" "
         "(--etcd_ca_file, --etcd_client_cert_file), by result; a failed one leaves the "
         "previous files in use.",
         out);
  Sample("qr_client_tls_reloads_total", "{target=\"cluster\",result=\"ok\"}",
         static_cast<int64_t>(s.cluster_reloads), out);
  Sample("qr_client_tls_reloads_total", "{target=\"cluster\",result=\"failed\"}",
         static_cast<int64_t>(s.cluster_failures), out);
  if (server.etcd_client_tls_enabled()) {
    Sample("qr_client_tls_reloads_total", "{target=\"etcd\",result=\"ok\"}",
           static_cast<int64_t>(s.etcd_reloads), out);
    Sample("qr_client_tls_reloads_total", "{target=\"etcd\",result=\"failed\"}",
           static_cast<int64_t>(s.etcd_failures), out);
  }
}

/// Only with authentication on (--auth_password_file).
void AppendAuthMetrics(BasicAuthenticator& auth, std::string* out) {
  Scalar("qr_auth_verifications_total", "counter",
         "Password verifications (PBKDF2) of credentials not in the cache.",
         static_cast<int64_t>(auth.verifications()), out);
  Scalar("qr_auth_cache_hits_total", "counter",
         "Requests authenticated from the cache of verified credentials.",
         static_cast<int64_t>(auth.cache_hits()), out);
  Scalar("qr_auth_failures_total", "counter", "Failed authentications (wrong or malformed).",
         static_cast<int64_t>(auth.failures()), out);
  Scalar("qr_auth_rate_limited_total", "counter",
         "Requests refused with 429 after too many failures from their address.",
         static_cast<int64_t>(auth.rate_limited()), out);
  Scalar("qr_auth_verify_queue_full_total", "counter",
         "Logins refused with 503 because --auth_max_pending_verifications were pending.",
         static_cast<int64_t>(auth.verify_queue_full()), out);
  Scalar("qr_auth_pending_verifications", "gauge",
         "Password verifications queued or running on the verification threads.",
         static_cast<int64_t>(auth.pending_verifications()), out);
}

}  // namespace

std::string RenderMetrics(CoordinatorServer* server) {
  std::string out;
  out.reserve(16 << 10);
  const QueryCoordinator& coordinator = *server->coordinator();
  AppendQueryCounters(coordinator, &out);
  AppendLimits(*server, &out);
  AppendResourceMetrics(*server, &out);
  AppendLatencyHistogram(coordinator, &out);
  AppendHttpMetrics(*server->webserver(), &out);
  AppendRegistryMetrics(coordinator, *server->exec_mgr(), server->options().metrics_per_shard,
                        &out);
  metrics::AppendProcessMetrics(&out);
  metrics::AppendHistoryMetrics(server->history(), server->history_restored(), &out);
  metrics::AppendClusterMetrics(server->membership(), &out);
  metrics::AppendForwardMetrics(server->forwarder(), &out);
  metrics::AppendClusterViewMetrics(server->cluster_view(), &out);
  if (PageWorkers* list = server->queries_list_workers(); list != nullptr) {
    Scalar("qr_queries_list_pending", "gauge",
           "GET /queries?json requests, and per-query pages of queries in the history, "
           "queued or running on their threads (--queries_list_threads).",
           static_cast<int64_t>(list->pending()), &out);
    Scalar("qr_queries_list_rejected_total", "counter",
           "Requests for those threads answered 503 because --queries_list_max_pending were "
           "pending.",
           static_cast<int64_t>(list->rejected()), &out);
  }
  if (server->tls_enabled()) AppendTlsMetrics(server->tls_reload_stats(), &out);
  if (server->cluster_client_tls_enabled()) AppendClientTlsMetrics(*server, &out);
  if (server->authenticator() != nullptr) AppendAuthMetrics(*server->authenticator(), &out);
  return out;
}

}  // namespace debug_pages
}  // namespace qr
