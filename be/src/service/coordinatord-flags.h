#pragma once

// coordinatord's command-line flags, defined and validated in coordinatord-flags.cc (their
// help, grouped, in coordinatord-help.cc).

#include <cstdint>

#include <gflags/gflags.h>

/// The most threads of one kind a flag may ask for (HTTP I/O, executors).
inline constexpr int32_t kMaxThreads = 1024;

DECLARE_string(http_bind_address);
DECLARE_int32(http_port);
DECLARE_int32(num_http_threads);
DECLARE_int32(http_idle_timeout_s);
DECLARE_int32(max_connections);
DECLARE_int32(max_connections_per_address);
DECLARE_int64(max_statement_bytes);
DECLARE_int64(max_header_bytes);
DECLARE_int32(num_query_threads);
DECLARE_int32(long_query_after_ms);
DECLARE_int32(long_query_nice);
DECLARE_string(long_query_policy);
DECLARE_int32(long_query_yield_us);
DECLARE_int32(scheduler_slice_us);
DECLARE_string(database);
DECLARE_string(catalog_name);
DECLARE_string(data_dir);
DECLARE_double(sample_scale_factor);
DECLARE_int32(max_running_queries);
DECLARE_int32(max_queued_queries);
DECLARE_int32(max_in_flight_queries);
DECLARE_int32(max_in_flight_queries_per_user);
DECLARE_int32(max_running_queries_per_user);
DECLARE_int32(max_long_queries_per_user);
DECLARE_int32(idle_query_timeout_s);
DECLARE_int32(abandoned_query_timeout_s);
DECLARE_int32(max_page_retries);
DECLARE_int32(max_failed_queries_per_user_per_s);
DECLARE_int32(exec_time_limit_s);
DECLARE_int32(shutdown_client_idle_s);
DECLARE_int32(shutdown_drain_s);
DECLARE_int32(max_session_properties);
DECLARE_int64(max_result_memory_mb);
DECLARE_int64(query_max_memory_mb);
DECLARE_int64(sqlite_heap_limit_mb);
DECLARE_int32(max_value_mb);
DECLARE_string(spill_dir);
DECLARE_int64(max_spill_mb);
DECLARE_int64(query_max_spill_mb);
DECLARE_int32(query_log_size);
DECLARE_string(query_history_dir);
DECLARE_string(query_history_sync);
DECLARE_int32(query_history_sync_interval_ms);
DECLARE_int32(query_history_segment_mb);
DECLARE_int64(query_history_max_age_s);
DECLARE_int32(query_history_max_segments);
DECLARE_int64(query_history_max_mb);
DECLARE_int32(query_history_queue_size);
DECLARE_int32(shutdown_grace_period_s);
DECLARE_string(default_user);
DECLARE_string(admin_users);
DECLARE_string(auth_password_file);
DECLARE_bool(allow_insecure_auth);
DECLARE_string(tls_cert_file);
DECLARE_string(tls_key_file);
DECLARE_int32(auth_max_failures);
DECLARE_int32(auth_failure_window_s);
DECLARE_int32(auth_verify_threads);
DECLARE_int32(auth_max_pending_verifications);
DECLARE_bool(http_trust_forwarded_headers);
DECLARE_int32(queries_list_threads);
DECLARE_int32(queries_list_max_pending);
DECLARE_bool(metrics_per_shard);
DECLARE_string(http_trusted_proxies);
DECLARE_string(http_allowed_hosts);
DECLARE_string(etcd_endpoints);
DECLARE_string(cluster_name);
DECLARE_string(advertised_uri);
DECLARE_int32(cluster_lease_ttl_s);
DECLARE_int32(cluster_max_members);
DECLARE_int32(etcd_request_timeout_ms);
DECLARE_int32(cluster_forward_timeout_ms);
DECLARE_int32(cluster_forward_pool_size);
DECLARE_int32(cluster_view_timeout_ms);
DECLARE_int32(query_plan_timeout_ms);
DECLARE_string(cluster_secret_file);
DECLARE_string(cluster_ca_file);
DECLARE_string(cluster_client_cert_file);
DECLARE_string(cluster_client_key_file);
DECLARE_string(etcd_ca_file);
DECLARE_string(etcd_client_cert_file);
DECLARE_string(etcd_client_key_file);
