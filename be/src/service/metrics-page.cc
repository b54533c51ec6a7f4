// GET /metrics: the Prometheus text exposition format, version 0.0.4. Every family is written
// as '# HELP', '# TYPE', then all of its samples, as the format requires. Reading the numbers
// takes no registry lock (per-shard statistics are published atomics).

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/query-exec-mgr.h"
#include "service/coordinator-server.h"
#include "service/debug-pages.h"
#include "service/query-coordinator.h"
#include "util/webserver.h"

namespace qr {
namespace DebugPages {
namespace {

/// Appends the comment lines of one metric family.
void Family(const char* name, const char* type, const char* help, std::string* out) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

/// Appends one sample line; 'labels' is "" or "{k=\"v\",...}".
void Sample(const char* name, const std::string& labels, const std::string& value,
            std::string* out) {
  *out += name;
  *out += labels;
  *out += ' ';
  *out += value;
  *out += '\n';
}

void Sample(const char* name, const std::string& labels, int64_t value, std::string* out) {
  Sample(name, labels, std::to_string(value), out);
}

/// A family with a single unlabeled sample.
void Scalar(const char* name, const char* type, const char* help, int64_t value,
            std::string* out) {
  Family(name, type, help, out);
  Sample(name, "", value, out);
}

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
  Scalar("qr_queries_running", "gauge", "Queries holding an execution slot.", m.running, out);
  Scalar("qr_queries_queued", "gauge", "Queries waiting for an execution slot.", m.queued, out);
  Scalar("qr_queries_in_flight", "gauge", "Queries in the coordinator's registry.",
         m.in_flight, out);
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
}

/// The per-shard statistics of one registry, read shard by shard.
struct RegistryStats {
  const char* registry;
  std::vector<ShardStats> shards;
};

template <typename Map>
RegistryStats ReadStats(const char* registry, const Map& map) {
  RegistryStats r{registry, {}};
  for (int i = 0; i < map.num_shards(); ++i) r.shards.push_back(map.GetShardStats(i));
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

void AppendRegistryMetrics(const QueryCoordinator& coordinator, const QueryExecMgr& exec,
                           std::string* out) {
  std::vector<RegistryStats> registries = {ReadStats("coordinator", coordinator.registry()),
                                           ReadStats("executor", exec.registry())};
  ShardFamily("qr_registry_shard_entries", "gauge", "Entries in a registry shard.", registries,
              &ShardStats::entries, out);
  ShardFamily("qr_registry_shard_lock_acquisitions_total", "counter",
              "Acquisitions of a registry shard's lock.", registries, &ShardStats::acquisitions,
              out);
  ShardFamily("qr_registry_shard_lock_shared_acquisitions_total", "counter",
              "Shared acquisitions (lookups) of a registry shard's lock, included in "
              "qr_registry_shard_lock_acquisitions_total.",
              registries, &ShardStats::shared_acquisitions, out);
  ShardFamily("qr_registry_shard_contended_acquisitions_total", "counter",
              "Acquisitions of a registry shard's lock that found it held.", registries,
              &ShardStats::contended_acquisitions, out);
  ShardFamily("qr_registry_shard_lock_sleeps_total", "counter",
              "Times a thread slept in the kernel waiting for a registry shard's lock.",
              registries, &ShardStats::sleeps, out);
  Scalar("qr_executor_queries_live", "gauge", "Executor-side query states alive.",
         exec.num_live(), out);
  Scalar("qr_executor_queries_created_total", "counter", "Executor-side query states created.",
         exec.num_created(), out);
  Scalar("qr_executor_queries_released_total", "counter",
         "Executor-side query states released (last reference dropped).", exec.num_released(),
         out);
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
  AppendLatencyHistogram(coordinator, &out);
  AppendHttpMetrics(*server->webserver(), &out);
  AppendRegistryMetrics(coordinator, *server->exec_mgr(), &out);
  if (server->authenticator() != nullptr) AppendAuthMetrics(*server->authenticator(), &out);
  return out;
}

}  // namespace DebugPages
}  // namespace qr
