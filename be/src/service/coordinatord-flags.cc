// coordinatord's command-line flags: definitions, help text and the validators that refuse a
// bad value at start-up with a message naming the flag. Read by main() (coordinatord.cc).

#include "service/coordinatord-flags.h"

#include <cstdio>
#include <string>
#include <vector>

#include "cluster/etcd-client.h"
#include "http/client-address.h"
#include "runtime/thread-schedule.h"
#include "runtime/trino-metadata.h"
#include "service/query-history.h"
#include "util/unique-id.h"

DEFINE_string(http_bind_address, "127.0.0.1", "Address the HTTP server binds to.");
DEFINE_int32(http_port, 8080, "HTTP port (0 picks a free one and prints it).");
DEFINE_int32(num_http_threads, 2, "HTTP I/O threads.");
DEFINE_int32(http_idle_timeout_s, 60, "Close HTTP connections idle for this long.");
DEFINE_int32(max_connections, 10000,
             "HTTP connections open at once; a new one beyond gets a minimal 503 and is "
             "closed.");
DEFINE_int32(max_connections_per_address, 256,
             "HTTP connections open at once from one client address (all of loopback counts as "
             "one, IPv6 by /64; --http_trusted_proxies are exempt); beyond, a minimal 503 and "
             "close (0: no limit).");
DEFINE_int64(max_statement_bytes, 1 << 20, "Largest accepted SQL statement (413 beyond).");
DEFINE_int64(max_header_bytes, 16 << 10, "Largest accepted request header block (431 beyond).");
DEFINE_int32(num_query_threads, 0,
             "Executor threads (0: --max_running_queries, so that every admitted query runs at "
             "once and the kernel shares the cores among them: a long query cannot keep a "
             "short one from an executor).");
DEFINE_int32(long_query_after_ms, 20,
             "An executor thread running one query for longer than this gets a lower CPU "
             "priority (--long_query_nice) until the query ends, so that short queries run "
             "first (0: off).");
DEFINE_int32(long_query_nice, 19,
             "How much the nice value of a long query's executor thread is raised, 0-19 "
             "(0: off; the result is capped at 19), with --long_query_policy=nice.");
DEFINE_string(long_query_policy, "nice",
              "How a long query's executor thread is demoted: nice (its nice value is raised by "
              "--long_query_nice until the query ends) or idle (it runs under SCHED_IDLE, the "
              "kernel's lowest weight: short queries first, long ones only on the CPU nothing "
              "else on the host wants; for dedicated hosts).");
DEFINE_int32(long_query_yield_us, 200,
             "A query's executor thread, once the query has run this many microseconds, yields "
             "the CPU after each further this many, so that a short query's thread waiting "
             "beside it runs at once instead of at the scheduler's next tick. 0: never; else 10 "
             "to 1000000.");
DEFINE_int32(max_long_queries_per_user, 0,
             "Long queries (running for over --long_query_after_ms) of one user that run at "
             "once; a further one keeps its slot and executor but waits, using no CPU, until one "
             "of them ends, so that a user's long queries weigh on other users' short ones as "
             "two would (0: the number of CPUs the daemon may run on).");
DEFINE_int32(scheduler_slice_us, 100,
             "The scheduler slice (microseconds) HTTP I/O threads and the executors of short "
             "queries ask the kernel for, so that they preempt long queries when they wake "
             "(Linux 6.12 and later; earlier kernels ignore it); a demoted long query's executor "
             "goes back to the kernel's default. 0: every thread keeps the default; else 100 to "
             "100000.");
DEFINE_string(database, "", "Serve this SQLite file read-only instead of the sample database.");
DEFINE_string(catalog_name, "sqlite",
              "The name of the served database's catalog in Trino's metadata (SHOW CATALOGS, "
              "system.jdbc.catalogs) and three-part names (catalog.main.table).");
DEFINE_string(data_dir, "data", "Where the generated sample database is kept.");
DEFINE_double(sample_scale_factor, 0.01, "TPC-H scale factor of the sample database.");
DEFINE_int32(max_running_queries, 16, "Queries executing at once; more wait in a queue.");
DEFINE_int32(max_queued_queries, 1000, "Queued queries; more fail with QUERY_QUEUE_FULL.");
DEFINE_int32(max_in_flight_queries, 1000,
             "Queries queued, running or waiting for their clients to fetch, in total; more "
             "fail with QUERY_QUEUE_FULL.");
DEFINE_int32(max_in_flight_queries_per_user, 200,
             "Queries in flight (as --max_in_flight_queries) for one user; more fail with "
             "QUERY_QUEUE_FULL.");
DEFINE_int32(max_running_queries_per_user, 0,
             "Running slots one user may hold (0: three quarters of --max_running_queries, so "
             "that other users always find slots). A free slot goes to the queued user served "
             "least recently.");
DEFINE_int32(idle_query_timeout_s, 300,
             "Cancel a query whose client has not polled for this long (0: never).");
DEFINE_int32(abandoned_query_timeout_s, 30,
             "Cancel a query whose client never fetched a result within this long of the "
             "submission (ABANDONED_QUERY; 0: only --idle_query_timeout_s).");
DEFINE_int32(max_page_retries, 10,
             "A GET of an already answered nextUri (a client's retry) gets the same page again "
             "at most this many times per page; beyond, 429 (0: no limit).");
DEFINE_int32(max_failed_queries_per_user_per_s, 50,
             "Failed queries per second one user may have while other users have queries in "
             "flight; beyond, that user's submissions are answered 429 (QUERY_QUEUE_FULL) after "
             "1 s, until its budget refills (0: no limit).");
DEFINE_int32(exec_time_limit_s, 300,
             "Fail queries executing longer than this with EXCEEDED_TIME_LIMIT (0: no limit).");
DEFINE_int32(shutdown_drain_s, 5,
             "On SIGTERM, after the queries ended, how long the HTTP server may take to finish "
             "the requests under way (their answers close the connections; idle connections "
             "close at once) before it stops (0: at once, cutting them off).");
DEFINE_int32(shutdown_client_idle_s, 5,
             "On SIGTERM, queries whose clients have not fetched for this long are canceled at "
             "once instead of being waited for.");
DEFINE_int32(max_session_properties, 100,
             "X-Trino-Session properties accepted per query (400 beyond).");
DEFINE_int64(max_result_memory_mb, 1024,
             "Encoded query results held in memory by all queries together (pages being "
             "encoded, buffered or sent); a query that needs more fails with "
             "EXCEEDED_GLOBAL_MEMORY_LIMIT.");
DEFINE_int64(query_max_memory_mb, 128,
             "Encoded results one query may hold (a single wide row included); beyond it the "
             "query fails with EXCEEDED_LOCAL_MEMORY_LIMIT.");
DEFINE_int64(sqlite_heap_limit_mb, 512,
             "SQLite's heap for all running queries (counted without SQLite's global memory "
             "mutex); a query that needs more fails with EXCEEDED_GLOBAL_MEMORY_LIMIT.");
DEFINE_int32(max_value_mb, 2,
             "The most one value (string, BLOB) or row may hold, in MiB; a statement that makes "
             "a larger one fails with GENERIC_INSUFFICIENT_RESOURCES. Also bounds the time of "
             "one call of a built-in function, which nothing interrupts (~25-50 ms at 2 MiB for "
             "the slowest, the json_* functions).");
DEFINE_string(spill_dir, "",
              "Directory of SQLite's temporary files (sorts, GROUP BY, DISTINCT); empty: "
              "<data_dir>/spill. Stale files of an earlier run are removed at start-up.");
DEFINE_int64(max_spill_mb, 8192,
             "Temporary-file bytes of all queries together (EXCEEDED_SPILL_LIMIT beyond).");
DEFINE_int64(query_max_spill_mb, 2048,
             "Temporary-file bytes of one query (EXCEEDED_SPILL_LIMIT beyond).");
DEFINE_int32(query_log_size, 200, "Completed queries kept for the debug pages.");
DEFINE_string(query_history_dir, "",
              "Directory of the durable query history: every completed query is appended to "
              "it, and the newest --query_log_size are shown again after a restart (empty: "
              "off).");
DEFINE_string(query_history_sync, "batch",
              "How the query history is written: 'batch' (each record at once, grouped with "
              "those that arrive meanwhile; one fdatasync for all written since the last), "
              "'interval' (written and synced within --query_history_sync_interval_ms) or "
              "'none' (written within the interval, syncing left to the kernel).");
DEFINE_int32(query_history_sync_interval_ms, 1000,
             "With --query_history_sync=interval or none, the longest a completed query's "
             "record waits to be written (and, with interval, synced).");
DEFINE_int32(query_history_segment_mb, 64,
             "A query history segment file is closed and a new one started past this size.");
DEFINE_int64(query_history_max_age_s, 7 * 24 * 3600,
             "Closed query history segments older than this are deleted (0: no age limit).");
DEFINE_int32(query_history_max_segments, 1000,
             "Closed query history segments kept at most; the oldest go first (0: no limit).");
DEFINE_int64(query_history_max_mb, 1024,
             "Bytes of closed query history segments kept at most; the oldest go first (0: no "
             "limit).");
DEFINE_int32(query_history_queue_size, 50000,
             "Completed queries waiting for the history writer at most; beyond, records are "
             "dropped (counted in qr_history_dropped_records_total, with a warning) rather than "
             "making queries wait for the disk.");
DEFINE_int32(shutdown_grace_period_s, 30,
             "On SIGTERM/SIGINT, how long running queries get to finish before being canceled.");
DEFINE_string(default_user, "", "User for requests that name none (empty: they get 401).");
DEFINE_string(admin_users, "",
              "Comma-separated users who may see and cancel every query (with authentication: "
              "and act as any user).");
DEFINE_string(auth_password_file, "",
              "Require HTTP Basic authentication against this file of users and salted "
              "PBKDF2 hashes (lines made by coordinatord-passwd). Re-read on SIGHUP.");
DEFINE_bool(allow_insecure_auth, false,
            "Allow --auth_password_file without TLS (passwords cross the network in clear).");
DEFINE_string(tls_cert_file, "",
              "Serve HTTPS with this PEM certificate (chain). Re-read with --tls_key_file on "
              "SIGHUP: new connections get the new certificate.");
DEFINE_string(tls_key_file, "", "The PEM private key of --tls_cert_file. Re-read on SIGHUP.");
DEFINE_int32(auth_max_failures, 10,
             "Failed logins of one user from one client address (see --http_trusted_proxies) "
             "within --auth_failure_window_s before that pair's requests get 429; checks in "
             "flight count too.");
DEFINE_int32(auth_failure_window_s, 60, "The window of --auth_max_failures.");
DEFINE_int32(auth_verify_threads, 1,
             "Threads that verify passwords (PBKDF2) not in the credential cache, off the "
             "HTTP I/O threads.");
DEFINE_int32(auth_max_pending_verifications, 64,
             "Password verifications queued or running at most; beyond it a login gets 503 "
             "with Retry-After: 1.");
DEFINE_bool(http_trust_forwarded_headers, false,
            "Build nextUri from X-Forwarded-Host/Proto (only behind a trusted proxy).");
DEFINE_int32(queries_list_threads, 1,
             "Threads that answer GET /queries?json (each may read up to 64 MiB of the query "
             "history) and the per-query pages of queries read from the history, off the "
             "HTTP I/O threads (1-1024).");
DEFINE_int32(queries_list_max_pending, 16,
             "Requests queued or running on --queries_list_threads at most; beyond it one "
             "gets 503 with Retry-After: 1.");
DEFINE_bool(metrics_per_shard, false,
            "/metrics also lists each registry shard's entries and lock counters (5 series per "
            "shard of each registry: 2,560 lines with 256 shards); by default only "
            "per-registry aggregates.");
DEFINE_string(http_allowed_hosts, "",
              "Comma-separated host names clients may send in Host besides localhost and IP "
              "addresses ('*': any). When set, a request naming another host gets 403; when "
              "empty, that check is made only by a server bound to loopback without "
              "authentication (a defence against DNS rebinding: a page whose own name an "
              "attacker points at 127.0.0.1 would otherwise read the server's answers).");
DEFINE_string(http_trusted_proxies, "",
              "Comma-separated addresses and CIDRs (IPv4, IPv6) of proxies trusted to name the "
              "client in X-Forwarded-For: failed logins of a request through one of them count "
              "against the last untrusted hop, not the proxy (empty: none).");
DEFINE_string(etcd_endpoints, "",
              "Join a cluster of coordinators through etcd's v3 HTTP/JSON gateway at these "
              "comma-separated [http[s]://]host:port (https:// is TLS, see --etcd_ca_file; "
              "empty: run alone). docs/operations.md#cluster.");
DEFINE_string(cluster_name, "default",
              "The cluster to join (its etcd keys are under /coordinatord/<name>/): letters, "
              "digits, '.', '_' and '-', at most 64.");
DEFINE_string(advertised_uri, "",
              "How other members and clients reach this coordinator, http[s]://host:port "
              "(empty: the scheme and the bound address and port).");
DEFINE_int32(cluster_lease_ttl_s, 10,
             "TTL of the member's etcd lease: a member that stops renewing it (killed, cut off) "
             "leaves the others' view this long after its last renewal.");
DEFINE_int32(cluster_max_members, 1024,
             "Member ids are 1..this (query ids carry the owner's; at most 65535).");
DEFINE_int32(etcd_request_timeout_ms, 2000,
             "Bound of each request to etcd; a failed one is retried with backoff.");
DEFINE_int32(cluster_forward_timeout_ms, 5000,
             "Bound of a request forwarded to the member owning its query, beyond the wait a "
             "poll asks for (maxWait); an owner that does not answer in time fails the request "
             "with REMOTE_HOST_GONE.");
DEFINE_int32(cluster_forward_pool_size, 8,
             "Idle keep-alive connections kept per member and HTTP I/O thread for forwarded "
             "requests.");
DEFINE_int32(cluster_view_timeout_ms, 2000,
             "How long the other members may take to answer their part of a cluster-wide "
             "listing (/queries, /v1/query, system.runtime.queries); one that does not is "
             "marked as not answering and its queries are left out.");
DEFINE_int32(query_plan_timeout_ms, 10000,
             "How long the EXPLAIN of the per-query page's plan (/query_plan) may wait for a "
             "running slot and run; then it fails with EXCEEDED_TIME_LIMIT and the page shows "
             "that error instead of a plan.");
DEFINE_string(cluster_secret_file, "",
              "A file (not readable by others, at least 16 bytes) with the secret the members "
              "of a cluster share: a forwarded request carries the client's address and, "
              "with authentication, its authenticated user signed with it (HMAC-SHA256). "
              "Without it, an owner sees the forwarding member as the client, refuses "
              "forwarded users and authenticates forwarded requests again.");
DEFINE_string(cluster_ca_file, "",
              "PEM CA certificates that members with an https:// --advertised_uri must chain "
              "to (their certificate must also name the URI's host); requests to a member "
              "that fails the check fail (empty: the system's trust store). Re-read on SIGHUP "
              "(connections opened afterwards use it).");
DEFINE_string(cluster_client_cert_file, "",
              "A PEM client certificate (chain) presented to members over TLS, for members "
              "that require one (with --cluster_client_key_file; empty: none).");
DEFINE_string(cluster_client_key_file, "",
              "The unencrypted PEM private key of --cluster_client_cert_file. Both re-read on "
              "SIGHUP.");
DEFINE_string(etcd_ca_file, "",
              "PEM CA certificates that https:// --etcd_endpoints must chain to (their "
              "certificate must also name the endpoint's host; empty: the system's trust "
              "store). Re-read on SIGHUP (connections opened afterwards use it).");
DEFINE_string(etcd_client_cert_file, "",
              "A PEM client certificate (chain) presented to https:// etcd endpoints, for an "
              "etcd run with --client-cert-auth (with --etcd_client_key_file; empty: none).");
DEFINE_string(etcd_client_key_file, "",
              "The unencrypted PEM private key of --etcd_client_cert_file. Both re-read on "
              "SIGHUP.");

namespace {

bool ValidatePositive(const char* flag, int32_t v) {
  if (v > 0) return true;
  fprintf(stderr, "--%s must be positive, got %d\n", flag, v);
  return false;
}
bool ValidateNonNegative(const char* flag, int32_t v) {
  if (v >= 0) return true;
  fprintf(stderr, "--%s must be >= 0, got %d\n", flag, v);
  return false;
}
bool ValidatePositive64(const char* flag, int64_t v) {
  if (v > 0 && v <= (int64_t{1} << 40)) return true;
  fprintf(stderr, "--%s must be in [1, 2^40] (MiB), got %lld\n", flag, static_cast<long long>(v));
  return false;
}
/// 0, or the range Linux accepts for a SCHED_OTHER slice.
bool ValidateSchedulerSlice(const char* flag, int32_t v) {
  if (v == 0 || (v >= qr::kMinSchedulerSliceUs && v <= qr::kMaxSchedulerSliceUs)) return true;
  fprintf(stderr, "--%s must be 0 (the kernel's default) or in [%d, %d] microseconds, got %d\n",
          flag, qr::kMinSchedulerSliceUs, qr::kMaxSchedulerSliceUs, v);
  return false;
}
bool ValidateYieldInterval(const char* flag, int32_t v) {
  if (v == 0 || (v >= 10 && v <= 1000000)) return true;
  fprintf(stderr, "--%s must be 0 (never) or in [10, 1000000] microseconds, got %d\n", flag, v);
  return false;
}
/// SQLite's compiled-in SQLITE_MAX_LENGTH is 1e9 bytes, ~953 MiB.
bool ValidateValueMb(const char* flag, int32_t v) {
  if (v >= 1 && v <= 953) return true;
  fprintf(stderr, "--%s must be in [1, 953] (MiB), got %d\n", flag, v);
  return false;
}
bool ValidateNice(const char* flag, int32_t v) {
  if (v >= 0 && v <= 19) return true;
  fprintf(stderr, "--%s must be in [0, 19], got %d\n", flag, v);
  return false;
}
/// Threads: a count past this is a typo, not a configuration (each executor thread also holds
/// a SQLite connection and its page cache).
bool ValidateThreads(const char* flag, int32_t v) {
  if (v >= 1 && v <= kMaxThreads) return true;
  fprintf(stderr, "--%s must be in [1, %d], got %d\n", flag, kMaxThreads, v);
  return false;
}
bool ValidateBytes(const char* flag, int64_t v) {
  // 0 would refuse everything and a negative size is no size at all.
  if (v >= 1024 && v <= (int64_t{1} << 30)) return true;
  fprintf(stderr, "--%s must be in [1024, 2^30] bytes, got %lld\n", flag,
          static_cast<long long>(v));
  return false;
}
bool ValidateNonNegative64(const char* flag, int64_t v) {
  if (v >= 0) return true;
  fprintf(stderr, "--%s must be >= 0, got %lld\n", flag, static_cast<long long>(v));
  return false;
}
bool ValidateSegmentMb(const char* flag, int32_t v) {
  if (v >= 1 && v <= 4096) return true;
  fprintf(stderr, "--%s must be in [1, 4096] (MiB), got %d\n", flag, v);
  return false;
}
bool ValidateLongQueryPolicy(const char* flag, const std::string& v) {
  if (v == "nice" || v == "idle") return true;
  fprintf(stderr, "--%s must be nice or idle, got '%s'\n", flag, v.c_str());
  return false;
}
bool ValidateHistorySync(const char* flag, const std::string& v) {
  qr::HistorySyncMode mode;
  if (qr::ParseHistorySyncMode(v, &mode)) return true;
  fprintf(stderr, "--%s must be batch, interval or none, got '%s'\n", flag, v.c_str());
  return false;
}
bool ValidateNetworks(const char* flag, const std::string& v) {
  qr::IpNetworks networks;
  qr::Status s = qr::IpNetworks::Parse(v, &networks);
  if (s.ok()) return true;
  fprintf(stderr, "--%s: %s\n", flag, s.message().c_str());
  return false;
}
bool ValidateCatalog(const char* flag, const std::string& v) {
  qr::Status s = qr::ValidateCatalogName(v);
  if (s.ok()) return true;
  fprintf(stderr, "--%s: %s\n", flag, s.message().c_str());
  return false;
}
bool ValidatePort(const char* flag, int32_t v) {
  if (v >= 0 && v <= 65535) return true;
  fprintf(stderr, "--%s must be in [0, 65535], got %d\n", flag, v);
  return false;
}

bool ValidateEtcdEndpoints(const char* flag, const std::string& v) {
  std::vector<std::string> endpoints;
  if (v.empty()) return true;
  qr::Status s = qr::ParseEtcdEndpoints(v, &endpoints);
  if (s.ok()) return true;
  fprintf(stderr, "--%s: %s\n", flag, s.message().c_str());
  return false;
}
bool ValidateClusterName(const char* flag, const std::string& v) {
  const bool ok = !v.empty() && v.size() <= 64 &&
                  v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789._-") == std::string::npos;
  if (ok) return true;
  fprintf(stderr, "--%s must be 1 to 64 letters, digits, '.', '_' or '-', got '%s'\n", flag,
          v.c_str());
  return false;
}
bool ValidateAdvertisedUri(const char* flag, const std::string& v) {
  auto has_authority = [&](std::string_view scheme) {
    return v.starts_with(scheme) && v.size() > scheme.size() &&
           v.find_first_of("/?# ", scheme.size()) == std::string::npos;
  };
  if (v.empty() || has_authority("http://") || has_authority("https://")) return true;
  fprintf(stderr, "--%s must be http://host:port or https://host:port (no path), got '%s'\n",
          flag, v.c_str());
  return false;
}
bool ValidateLeaseTtl(const char* flag, int32_t v) {
  // etcd grants at least ~2 s whatever is asked; past 10 minutes a dead member lingers.
  if (v >= 2 && v <= 600) return true;
  fprintf(stderr, "--%s must be in [2, 600] seconds, got %d\n", flag, v);
  return false;
}
bool ValidateMaxMembers(const char* flag, int32_t v) {
  if (v >= 1 && v <= static_cast<int32_t>(qr::kMaxQueryOwner)) return true;
  fprintf(stderr, "--%s must be in [1, %u], got %d\n", flag, qr::kMaxQueryOwner, v);
  return false;
}
bool ValidateForwardTimeout(const char* flag, int32_t v) {
  if (v >= 100 && v <= 600000) return true;
  fprintf(stderr, "--%s must be in [100, 600000] ms, got %d\n", flag, v);
  return false;
}
bool ValidateViewTimeout(const char* flag, int32_t v) {
  if (v >= 50 && v <= 600000) return true;
  fprintf(stderr, "--%s must be in [50, 600000] ms, got %d\n", flag, v);
  return false;
}
bool ValidateForwardPool(const char* flag, int32_t v) {
  if (v >= 0 && v <= 1024) return true;
  fprintf(stderr, "--%s must be in [0, 1024], got %d\n", flag, v);
  return false;
}
bool ValidateEtcdTimeout(const char* flag, int32_t v) {
  if (v >= 100 && v <= 60000) return true;
  fprintf(stderr, "--%s must be in [100, 60000] ms, got %d\n", flag, v);
  return false;
}

}  // namespace

DEFINE_validator(etcd_endpoints, &ValidateEtcdEndpoints);
DEFINE_validator(cluster_name, &ValidateClusterName);
DEFINE_validator(advertised_uri, &ValidateAdvertisedUri);
DEFINE_validator(cluster_lease_ttl_s, &ValidateLeaseTtl);
DEFINE_validator(cluster_max_members, &ValidateMaxMembers);
DEFINE_validator(etcd_request_timeout_ms, &ValidateEtcdTimeout);
DEFINE_validator(cluster_forward_timeout_ms, &ValidateForwardTimeout);
DEFINE_validator(cluster_forward_pool_size, &ValidateForwardPool);
DEFINE_validator(cluster_view_timeout_ms, &ValidateViewTimeout);
DEFINE_validator(query_plan_timeout_ms, &ValidateViewTimeout);
DEFINE_validator(http_port, &ValidatePort);
DEFINE_validator(catalog_name, &ValidateCatalog);
DEFINE_validator(num_http_threads, &ValidateThreads);
DEFINE_validator(max_statement_bytes, &ValidateBytes);
DEFINE_validator(max_header_bytes, &ValidateBytes);
DEFINE_validator(http_idle_timeout_s, &ValidatePositive);
DEFINE_validator(max_running_queries, &ValidatePositive);
DEFINE_validator(max_queued_queries, &ValidateNonNegative);
DEFINE_validator(num_query_threads, &ValidateNonNegative);  // and <= kMaxThreads: CheckFlags()
DEFINE_validator(long_query_after_ms, &ValidateNonNegative);
DEFINE_validator(long_query_nice, &ValidateNice);
DEFINE_validator(long_query_policy, &ValidateLongQueryPolicy);
DEFINE_validator(scheduler_slice_us, &ValidateSchedulerSlice);
DEFINE_validator(long_query_yield_us, &ValidateYieldInterval);
DEFINE_validator(idle_query_timeout_s, &ValidateNonNegative);
DEFINE_validator(max_in_flight_queries, &ValidatePositive);
DEFINE_validator(max_session_properties, &ValidatePositive);
DEFINE_validator(max_result_memory_mb, &ValidatePositive64);
DEFINE_validator(query_max_memory_mb, &ValidatePositive64);
DEFINE_validator(sqlite_heap_limit_mb, &ValidatePositive64);
DEFINE_validator(max_value_mb, &ValidateValueMb);
DEFINE_validator(max_spill_mb, &ValidatePositive64);
DEFINE_validator(query_max_spill_mb, &ValidatePositive64);
DEFINE_validator(max_in_flight_queries_per_user, &ValidatePositive);
DEFINE_validator(max_running_queries_per_user, &ValidateNonNegative);
DEFINE_validator(max_long_queries_per_user, &ValidateNonNegative);
DEFINE_validator(abandoned_query_timeout_s, &ValidateNonNegative);
DEFINE_validator(shutdown_client_idle_s, &ValidateNonNegative);
DEFINE_validator(shutdown_drain_s, &ValidateNonNegative);
DEFINE_validator(exec_time_limit_s, &ValidateNonNegative);
DEFINE_validator(max_page_retries, &ValidateNonNegative);
DEFINE_validator(max_failed_queries_per_user_per_s, &ValidateNonNegative);
DEFINE_validator(query_log_size, &ValidateNonNegative);
DEFINE_validator(shutdown_grace_period_s, &ValidateNonNegative);
DEFINE_validator(query_history_sync, &ValidateHistorySync);
DEFINE_validator(query_history_sync_interval_ms, &ValidatePositive);
DEFINE_validator(query_history_segment_mb, &ValidateSegmentMb);
DEFINE_validator(query_history_max_age_s, &ValidateNonNegative64);
DEFINE_validator(query_history_max_segments, &ValidateNonNegative);
DEFINE_validator(query_history_max_mb, &ValidateNonNegative64);
DEFINE_validator(query_history_queue_size, &ValidatePositive);
DEFINE_validator(auth_max_failures, &ValidatePositive);
DEFINE_validator(auth_failure_window_s, &ValidatePositive);
DEFINE_validator(auth_verify_threads, &ValidatePositive);
DEFINE_validator(queries_list_threads, &ValidateThreads);
DEFINE_validator(queries_list_max_pending, &ValidatePositive);
DEFINE_validator(auth_max_pending_verifications, &ValidatePositive);
DEFINE_validator(http_trusted_proxies, &ValidateNetworks);
DEFINE_validator(max_connections, &ValidatePositive);
DEFINE_validator(max_connections_per_address, &ValidateNonNegative);
