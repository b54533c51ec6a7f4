// coordinatord: a query coordinator daemon speaking the Trino client REST protocol over an
// embedded, read-only SQLite engine. See README.md and docs/operations.md.

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <string>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "service/coordinator-server.h"
#include "util/sharded-query-map-util.h"

DEFINE_string(http_bind_address, "127.0.0.1", "Address the HTTP server binds to.");
DEFINE_int32(http_port, 8080, "HTTP port (0 picks a free one and prints it).");
DEFINE_int32(num_http_threads, 2, "HTTP I/O threads.");
DEFINE_int32(http_idle_timeout_s, 60, "Close HTTP connections idle for this long.");
DEFINE_int64(max_statement_bytes, 1 << 20, "Largest accepted SQL statement (413 beyond).");
DEFINE_int64(max_header_bytes, 16 << 10, "Largest accepted request header block (431 beyond).");
DEFINE_int32(num_query_threads, 0, "Executor threads (0: one per core).");
DEFINE_string(database, "", "Serve this SQLite file read-only instead of the sample database.");
DEFINE_string(data_dir, "data", "Where the generated sample database is kept.");
DEFINE_double(sample_scale_factor, 0.01, "TPC-H scale factor of the sample database.");
DEFINE_int32(max_running_queries, 16, "Queries executing at once; more wait in a queue.");
DEFINE_int32(max_queued_queries, 1000, "Queued queries; more fail with QUERY_QUEUE_FULL.");
DEFINE_int32(idle_query_timeout_s, 300,
             "Cancel a query whose client has not polled for this long (0: never).");
DEFINE_int32(exec_time_limit_s, 0, "Fail queries executing longer than this (0: no limit).");
DEFINE_int32(query_log_size, 200, "Completed queries kept for the debug pages.");
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
DEFINE_string(tls_cert_file, "", "Serve HTTPS with this PEM certificate (chain).");
DEFINE_string(tls_key_file, "", "The PEM private key of --tls_cert_file.");
DEFINE_int32(auth_max_failures, 10,
             "Failed logins from one address within --auth_failure_window_s before its "
             "requests get 429.");
DEFINE_int32(auth_failure_window_s, 60, "The window of --auth_max_failures.");
DEFINE_int32(auth_verify_threads, 1,
             "Threads that verify passwords (PBKDF2) not in the credential cache, off the "
             "HTTP I/O threads.");
DEFINE_int32(auth_max_pending_verifications, 64,
             "Password verifications queued or running at most; beyond it a login gets 503 "
             "with Retry-After: 1.");
DEFINE_bool(http_trust_forwarded_headers, false,
            "Build nextUri from X-Forwarded-Host/Proto (only behind a trusted proxy).");

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
bool ValidatePort(const char* flag, int32_t v) {
  if (v >= 0 && v <= 65535) return true;
  fprintf(stderr, "--%s must be in [0, 65535], got %d\n", flag, v);
  return false;
}

}  // namespace

DEFINE_validator(http_port, &ValidatePort);
DEFINE_validator(num_http_threads, &ValidatePositive);
DEFINE_validator(max_running_queries, &ValidatePositive);
DEFINE_validator(max_queued_queries, &ValidateNonNegative);
DEFINE_validator(num_query_threads, &ValidateNonNegative);
DEFINE_validator(idle_query_timeout_s, &ValidateNonNegative);
DEFINE_validator(exec_time_limit_s, &ValidateNonNegative);
DEFINE_validator(query_log_size, &ValidateNonNegative);
DEFINE_validator(shutdown_grace_period_s, &ValidateNonNegative);
DEFINE_validator(auth_max_failures, &ValidatePositive);
DEFINE_validator(auth_failure_window_s, &ValidatePositive);
DEFINE_validator(auth_verify_threads, &ValidatePositive);
DEFINE_validator(auth_max_pending_verifications, &ValidatePositive);

namespace qr {
namespace {

CoordinatorServer::Options OptionsFromFlags() {
  CoordinatorServer::Options o;
  o.database = FLAGS_database;
  o.data_dir = FLAGS_data_dir;
  o.sample_scale_factor = FLAGS_sample_scale_factor;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  o.num_query_threads = FLAGS_num_query_threads > 0 ? FLAGS_num_query_threads
                                                    : std::max(1, cores);
  o.http.bind_address = FLAGS_http_bind_address;
  o.http.port = FLAGS_http_port;
  o.http.num_threads = FLAGS_num_http_threads;
  o.http.idle_timeout = std::chrono::seconds(FLAGS_http_idle_timeout_s);
  o.http.max_body_bytes = static_cast<size_t>(FLAGS_max_statement_bytes);
  o.http.max_header_bytes = static_cast<size_t>(FLAGS_max_header_bytes);
  o.coordinator.max_running_queries = FLAGS_max_running_queries;
  o.coordinator.max_queued_queries = FLAGS_max_queued_queries;
  o.coordinator.idle_query_timeout_ms = int64_t{FLAGS_idle_query_timeout_s} * 1000;
  o.coordinator.exec_time_limit_ms = int64_t{FLAGS_exec_time_limit_s} * 1000;
  o.coordinator.query_log_size = FLAGS_query_log_size;
  o.protocol.default_user = FLAGS_default_user;
  o.protocol.trust_forwarded_headers = FLAGS_http_trust_forwarded_headers;
  o.admin_users = FLAGS_admin_users;
  o.auth_password_file = FLAGS_auth_password_file;
  o.allow_insecure_auth = FLAGS_allow_insecure_auth;
  o.auth.max_failures = FLAGS_auth_max_failures;
  o.auth.failure_window = std::chrono::seconds(FLAGS_auth_failure_window_s);
  o.auth.verify_threads = FLAGS_auth_verify_threads;
  o.auth.max_pending_verifications = static_cast<size_t>(FLAGS_auth_max_pending_verifications);
  o.tls_cert_file = FLAGS_tls_cert_file;
  o.tls_key_file = FLAGS_tls_key_file;
  return o;
}

int Main() {
  // Block the stop signals in every thread (threads inherit the mask) and take them
  // synchronously below: no async-signal-safety concerns, no polling.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // Re-reads the password file.
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
    if (server.authenticator() == nullptr) {
      LOG(INFO) << "SIGHUP ignored: no --auth_password_file to reload";
      continue;
    }
    Status reload = server.ReloadPasswordFile();
    if (!reload.ok()) {
      LOG(ERROR) << "Password file not reloaded (the old users stay): " << reload.message();
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
  gflags::SetUsageMessage("coordinatord [flags]: Trino-protocol query coordinator over SQLite");
  gflags::SetVersionString(QR_VERSION_STRING);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = FLAGS_logtostderr || FLAGS_log_dir.empty();
  google::InitGoogleLogging(argv[0]);
  return qr::Main();
}
