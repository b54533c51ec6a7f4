// coordinator-soak: a bounded soak test of coordinatord (ctest label "soak"; see
// docs/operations.md, "Soak test"). Starts the daemon on loopback with short timeouts, runs
// the loadgen's queries mode (several statements: short, multi-page, failing) together with
// fault injectors (disconnects mid-page, cancels racing completion, slow and stalled clients,
// oversized and malformed requests, idle connections) for a warm-up phase and a soak phase,
// then checks that the daemon still serves, that every submitted query is accounted for, that
// its registries drain, that its RSS returns near the warm baseline, and that it exits 0.
//
//   coordinator-soak --coordinatord=build/release/be/src/service/coordinatord
//       --data_dir=/tmp/soak-data [--duration_s=120] [--warmup_s=30]
// QR_SOAK_DURATION_S in the environment overrides --duration_s (to run longer or shorter).

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gflags/gflags.h>

#include "loadgen/loadgen-clients.h"
#include "soak/soak-daemon.h"
#include "soak/soak-faults.h"

// GCC defines __SANITIZE_ADDRESS__; clang 14 only answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define QR_SOAK_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QR_SOAK_UNDER_ASAN 1
#endif
#endif
#ifndef QR_SOAK_UNDER_ASAN
#define QR_SOAK_UNDER_ASAN 0
#endif

DEFINE_string(coordinatord, "", "The coordinatord binary under test.");
DEFINE_string(data_dir, "", "--data_dir of the daemon (the sample database is kept there).");
DEFINE_double(duration_s, 120, "Seconds of the soak phase (QR_SOAK_DURATION_S overrides).");
DEFINE_double(warmup_s, 30, "Seconds of the warm-up phase before the RSS baseline.");
DEFINE_int32(clients, 4, "Loadgen statement clients during both phases.");
DEFINE_double(rss_tolerance, 0.10, "The final RSS may exceed the warm baseline by this ratio.");
DEFINE_double(drain_timeout_s, 60, "Deadline for the registries to drain and the RSS to settle.");
DEFINE_double(max_request_latency_s, 10,
              "No request of the normal traffic may take longer (a long poll waits up to 1 s).");
DEFINE_int32(idle_query_timeout_s, 5, "--idle_query_timeout_s of the daemon under test.");
DEFINE_int32(http_idle_timeout_s, 4, "--http_idle_timeout_s of the daemon under test.");

namespace qr::soak {
namespace {

constexpr int64_t kMaxStatementBytes = 64 * 1024;
constexpr int64_t kMaxHeaderBytes = 8 * 1024;
// The daemon's budgets (MiB): the RSS peak must stay below their sum plus the warm baseline
// (plus the same again for the allocator's own keeping: ASan's quarantine, arenas).
constexpr int64_t kSqliteHeapLimitMb = 128;
constexpr int64_t kResultMemoryMb = 256;
constexpr int64_t kMaxSpillMb = 256;
constexpr int64_t kRssSlackKb = 16 * 1024;
constexpr std::chrono::seconds kStartTimeout{300};  // includes generating the sample database
constexpr std::chrono::seconds kRequestTimeout{30};
const char kMultiPageSql[] = "SELECT l_orderkey, l_linenumber, l_comment FROM lineitem";

std::chrono::nanoseconds Seconds(double s) {
  return std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9));
}

/// Everything the soak test ran and measured, for the checks and the report.
struct SoakState {
  DaemonProcess daemon;
  boost::asio::ip::tcp::endpoint endpoint;
  std::unique_ptr<SoakConnection> admin;  // metrics, the fresh queries
  loadgen::Config load;
  loadgen::RunStats load_stats;
  FaultCounters faults;
  int64_t admin_submitted = 0;
  int64_t lineitem_rows = 0;
  int64_t rss_baseline_kb = 0, rss_peak_kb = 0, rss_end_kb = 0;
  /// qr_allocator_in_use_bytes at the warm baseline (-1: not exported, a sanitizer build).
  double heap_baseline = -1;
  std::vector<std::string> failures;

  int64_t submitted() const {
    return admin_submitted + load_stats.statements_submitted + faults.submitted.load();
  }
  void Fail(const std::string& what) {
    fprintf(stderr, "SOAK CHECK FAILED: %s\n", what.c_str());
    failures.push_back(what);
  }
};

/// Runs 'sql' on the admin connection; the outcome, counted as submitted if it was.
QueryOutcome AdminQuery(SoakState* s, std::string_view sql) {
  QueryOutcome q = RunQuery(s->admin.get(), sql, Clock::now() + kRequestTimeout);
  if (q.submitted) ++s->admin_submitted;
  return q;
}

bool FetchMetrics(SoakState* s, std::string* text) {
  Answer a;
  if (!s->admin->Request("GET", "/metrics", {}, Clock::now() + kRequestTimeout, &a) ||
      a.status != 200) {
    s->admin->Close();
    return false;
  }
  *text = std::move(a.body);
  return true;
}

/// One phase: the loadgen's clients and every fault injector for 'seconds'; samples the RSS.
/// False (a failure recorded) if the daemon exited during the phase, which ends it at once.
bool RunPhase(SoakState* s, double seconds) {
  loadgen::RunControl run;
  loadgen::Worker worker(s->load, &run, 0, 1);
  const Clock::time_point start = Clock::now(), end = start + Seconds(seconds);
  run.SetWindow(start, start + std::chrono::hours(24));
  std::thread load([&worker] { worker.Run(); });
  FaultOptions options{s->endpoint, kMultiPageSql, kMaxStatementBytes, kMaxHeaderBytes,
                       std::chrono::seconds(FLAGS_http_idle_timeout_s)};
  StopSignal phase_over;
  std::thread faults([&] { RunFaults(options, phase_over, &s->faults); });
  Clock::time_point next_print = start;
  bool daemon_alive = true;
  // One RSS sample a second; the wait between two ends early if the daemon exits.
  for (Clock::time_point now = start; now < end; now = Clock::now()) {
    const int64_t rss = s->daemon.RssKb();
    s->rss_peak_kb = std::max(s->rss_peak_kb, rss);
    if (Clock::now() >= next_print) {
      printf("  %3.0f s: RSS %lld KiB\n",
             std::chrono::duration<double>(Clock::now() - start).count(),
             static_cast<long long>(rss));
      fflush(stdout);
      next_print += std::chrono::seconds(10);
    }
    if (s->daemon.WaitForExit(std::min(end, now + std::chrono::seconds(1)))) {
      s->Fail("coordinatord exited during the phase, after " +
              std::to_string(std::chrono::duration<double>(Clock::now() - start).count()) + " s");
      daemon_alive = false;
      break;
    }
  }
  phase_over.Raise();
  run.Stop(Clock::now());
  load.join();
  faults.join();
  s->load_stats.Merge(worker.stats());
  return daemon_alive;
}

/// The numbers that must all reach zero once no client is left.
struct Drain {
  double coordinator_entries = -1, executor_entries = -1, in_flight = -1, live = -1;
  double running = -1, queued = -1;
  bool Empty() const {
    return coordinator_entries == 0 && executor_entries == 0 && in_flight == 0 && live == 0 &&
           running == 0 && queued == 0;
  }
  std::string ToString() const {
    char buf[256];
    snprintf(buf, sizeof(buf),
             "coordinator registry entries %.0f, executor registry entries %.0f, in flight %.0f, "
             "executor states live %.0f, running %.0f, queued %.0f",
             coordinator_entries, executor_entries, in_flight, live, running, queued);
    return buf;
  }
};

/// Fetches /metrics until the registries are empty or 'deadline'; the last numbers seen. The
/// fetches go back to back (each one waits for the daemon's answer): nothing else runs now.
Drain WaitDrained(SoakState* s, Clock::time_point deadline) {
  Drain d;
  std::string m;
  const Clock::time_point start = Clock::now();
  for (int64_t fetches = 1;; ++fetches) {
    if (FetchMetrics(s, &m)) {
      d.coordinator_entries = MetricSum(m, "qr_registry_entries", "registry=\"coordinator\"");
      d.executor_entries = MetricSum(m, "qr_registry_entries", "registry=\"executor\"");
      d.in_flight = MetricSum(m, "qr_queries_in_flight");
      d.live = MetricSum(m, "qr_executor_queries_live");
      d.running = MetricSum(m, "qr_queries_running");
      d.queued = MetricSum(m, "qr_queries_queued");
    }
    if (d.Empty() || Clock::now() >= deadline) {
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      printf("drain: %s after %.2f s and %lld /metrics fetches\n",
             d.Empty() ? "empty" : "NOT empty", waited, static_cast<long long>(fetches));
      return d;
    }
  }
}

/// The daemon still answers a fresh query with the right rows.
void CheckStillServes(SoakState* s) {
  QueryOutcome q = AdminQuery(s, "SELECT n_nationkey, n_name FROM nation ORDER BY n_nationkey");
  if (q.state != "FINISHED" || q.rows != 25 || q.first_row != "[0,\"ALGERIA\"]") {
    s->Fail("daemon no longer serves: fresh nation query ended '" + q.state + "' " +
            q.error_name + " with " + std::to_string(q.rows) + " rows (expected FINISHED, 25), "
            "first row " + q.first_row + " " + q.problem);
  }
  q = AdminQuery(s, "SELECT count(*) FROM lineitem");
  if (q.state != "FINISHED" || q.first_row != "[" + std::to_string(s->lineitem_rows) + "]") {
    s->Fail("fresh count(*) query ended '" + q.state + "' with " + q.first_row +
            " (expected [" + std::to_string(s->lineitem_rows) + "]) " + q.problem);
  }
}

/// Every submitted query finished, failed or was canceled, and the daemon counted them all.
void CheckAccounting(SoakState* s, const std::string& metrics) {
  const double submitted = MetricSum(metrics, "qr_queries_submitted_total");
  const double finished = MetricSum(metrics, "qr_queries_finished_total");
  const double failed = MetricSum(metrics, "qr_queries_failed_total");
  const double canceled = MetricSum(metrics, "qr_queries_canceled_total");
  printf("accounting: driver submitted %lld; daemon submitted %.0f = finished %.0f + failed %.0f "
         "+ canceled %.0f (sum %.0f)\n", static_cast<long long>(s->submitted()), submitted,
         finished, failed, canceled, finished + failed + canceled);
  if (submitted != static_cast<double>(s->submitted())) {
    s->Fail("qr_queries_submitted_total is " + std::to_string(submitted) +
            " but the clients had " + std::to_string(s->submitted()) + " POSTs answered 200");
  }
  if (finished + failed + canceled != submitted) {
    s->Fail("finished " + std::to_string(finished) + " + failed " + std::to_string(failed) +
            " + canceled " + std::to_string(canceled) + " != submitted " +
            std::to_string(submitted));
  }
}

/// The memory and disk budgets held through the attacks, and what the drained daemon holds.
void CheckBudgets(SoakState* s, const std::string& metrics) {
  const double spill = MetricSum(metrics, "qr_spill_bytes");
  const double spill_peak = MetricSum(metrics, "qr_spill_peak_bytes");
  const double heap_peak = MetricSum(metrics, "qr_sqlite_heap_peak_bytes");
  const double result_peak = MetricSum(metrics, "qr_result_memory_peak_bytes");
  printf("budgets: spill peak %.0f MiB (limit %lld), now %.0f bytes; SQLite heap peak %.0f MiB "
         "(limit %lld); result memory peak %.0f MiB (limit %lld)\n", spill_peak / 1048576,
         static_cast<long long>(kMaxSpillMb), spill, heap_peak / 1048576,
         static_cast<long long>(kSqliteHeapLimitMb), result_peak / 1048576,
         static_cast<long long>(kResultMemoryMb));
  if (spill != 0) s->Fail("qr_spill_bytes is " + std::to_string(spill) + " once drained");
  if (spill_peak > kMaxSpillMb * 1048576.0) s->Fail("the spill peak passed --max_spill_mb");
  if (result_peak > kResultMemoryMb * 1048576.0) {
    s->Fail("the result memory peak passed --max_result_memory_mb");
  }
  // The allocator keeps some of what SQLite and the pages free (ASan's quarantine, arenas):
  // twice the budgets above the warm baseline is the bound.
  const int64_t rss_bound_kb = s->rss_baseline_kb + 2 * (kSqliteHeapLimitMb + kResultMemoryMb) * 1024;
  if (s->rss_peak_kb > rss_bound_kb) {
    s->Fail("RSS peaked at " + std::to_string(s->rss_peak_kb) + " KiB, above the bound " +
            std::to_string(rss_bound_kb) + " KiB (warm baseline + twice the memory budgets)");
  }
}

/// Waits (until 'deadline') for the RSS to come back within the tolerance of the baseline. An
/// RSS still above it fails unless malloc's bytes in use are back within the same tolerance of
/// theirs (qr_allocator_in_use_bytes): then the rest is free memory glibc's arenas keep after
/// a busier peak than the warm-up's (a busy machine queues more queries at once), not a leak,
/// which would be in use. Without that metric (sanitizer builds) the RSS decides alone.
void CheckRss(SoakState* s, Clock::time_point deadline) {
  // Plus a fixed slack: with the resource attackers, the executors' page caches and the
  // allocator's arenas (8 executor threads, each with its own) reach their sizes at different
  // times, which moved a ~70 MiB RSS by up to 10 MiB between two drained moments; a leak
  // over thousands of queries passes this anyway.
  const int64_t limit =
      static_cast<int64_t>(s->rss_baseline_kb * (1 + FLAGS_rss_tolerance)) + kRssSlackKb;
  while ((s->rss_end_kb = s->daemon.RssKb()) > limit && Clock::now() < deadline) {
    std::this_thread::yield();
  }
  printf("rss: warm baseline %lld KiB, peak %lld KiB, end %lld KiB (%+.1f%%)\n",
         static_cast<long long>(s->rss_baseline_kb), static_cast<long long>(s->rss_peak_kb),
         static_cast<long long>(s->rss_end_kb),
         100.0 * (s->rss_end_kb - s->rss_baseline_kb) / std::max<int64_t>(1, s->rss_baseline_kb));
  std::string m;
  const double heap_end = s->heap_baseline >= 0 && FetchMetrics(s, &m)
                              ? MetricSum(m, "qr_allocator_in_use_bytes")
                              : -1;
  if (heap_end >= 0) {
    printf("malloc in use: warm baseline %.0f KiB, end %.0f KiB; its arenas keep %.0f KiB free\n",
           s->heap_baseline / 1024, heap_end / 1024,
           MetricSum(m, "qr_allocator_free_bytes") / 1024);
  }
  const double heap_limit = s->heap_baseline * (1 + FLAGS_rss_tolerance) + kRssSlackKb * 1024.0;
  if (s->rss_end_kb > limit && heap_end >= 0 && heap_end <= heap_limit) {
    printf("rss: above the tolerance, but malloc's bytes in use are within it: the allocator's "
           "free memory, not a leak\n");
  } else if (s->rss_end_kb > limit) {
    if (heap_end >= 0) {
      s->Fail("malloc's bytes in use " + std::to_string(static_cast<int64_t>(heap_end / 1024)) +
              " KiB are more than " + std::to_string(static_cast<int>(FLAGS_rss_tolerance * 100)) +
              "% (+ " + std::to_string(kRssSlackKb / 1024) + " MiB) above the warm baseline " +
              std::to_string(static_cast<int64_t>(s->heap_baseline / 1024)) + " KiB");
    }
    s->Fail("RSS " + std::to_string(s->rss_end_kb) + " KiB is more than " +
            std::to_string(static_cast<int>(FLAGS_rss_tolerance * 100)) +
            "% (+ " + std::to_string(kRssSlackKb / 1024) + " MiB) above the warm baseline " +
            std::to_string(s->rss_baseline_kb) + " KiB");
  }
}

/// Only the admin connection is left open once every client is gone.
void CheckConnections(SoakState* s, Clock::time_point deadline) {
  std::string m;
  double open = -1;
  while (true) {
    if (FetchMetrics(s, &m)) open = MetricSum(m, "qr_http_connections_open");
    if (open == 1 || Clock::now() >= deadline) break;
  }
  if (open != 1) {
    s->Fail("qr_http_connections_open is " + std::to_string(open) +
            " once every client is gone (expected 1, the one reading /metrics)");
  }
}

void PrintReport(const SoakState& s) {
  const loadgen::RunStats& l = s.load_stats;
  int64_t errors = 0;
  for (const auto& [kind, n] : l.errors) errors += n;
  printf("loadgen: %lld statements submitted, %lld completed as expected (%lld of them the "
         "expected failures), %lld requests, %lld errors\n",
         static_cast<long long>(l.statements_submitted), static_cast<long long>(l.queries.count()),
         static_cast<long long>(l.expected_failures), static_cast<long long>(l.total_requests()),
         static_cast<long long>(errors));
  for (const auto& e : l.error_examples) printf("  loadgen error: %s\n", e.c_str());
  printf("faults injected:");
  for (int f = 0; f < static_cast<int>(Fault::kNumFaults); ++f) {
    printf(" %s %lld", FaultName(static_cast<Fault>(f)),
           static_cast<long long>(s.faults.injected(static_cast<Fault>(f))));
  }
  printf("\nfault queries: %lld submitted, %lld abandoned; cancel races: %lld finished first, "
         "%lld canceled\n", static_cast<long long>(s.faults.submitted.load()),
         static_cast<long long>(s.faults.abandoned.load()),
         static_cast<long long>(s.faults.race_finished.load()),
         static_cast<long long>(s.faults.race_canceled.load()));
  for (const auto& p : s.faults.problem_examples()) printf("  fault problem: %s\n", p.c_str());
  fflush(stdout);
}

/// The client problems of both phases: loadgen errors and fault-injector problems, and normal
/// requests held up by the misbehaving clients.
void CheckClients(SoakState* s) {
  int64_t errors = 0;
  for (const auto& [kind, n] : s->load_stats.errors) errors += n;
  if (errors > 0) s->Fail("the loadgen's clients saw " + std::to_string(errors) + " errors");
  loadgen::Histogram all;
  for (const loadgen::Histogram& h : s->load_stats.requests) all.Merge(h);
  printf("normal traffic request latency: p50 %lld us, p99 %lld us, max %lld us\n",
         static_cast<long long>(all.Percentile(0.5)), static_cast<long long>(all.Percentile(0.99)),
         static_cast<long long>(all.max()));
  if (all.max() > FLAGS_max_request_latency_s * 1e6) {
    s->Fail("a normal request took " + std::to_string(all.max() / 1000) + " ms (more than " +
            std::to_string(FLAGS_max_request_latency_s) + " s): slow clients held others up");
  }
  if (s->faults.problem_count() > 0) {
    s->Fail("the fault injectors saw " + std::to_string(s->faults.problem_count()) +
            " wrong answers (see 'fault problem' above)");
  }
  for (int f = 0; f < static_cast<int>(Fault::kNumFaults); ++f) {
    if (s->faults.injected(static_cast<Fault>(f)) == 0) {
      s->Fail(std::string("no fault of kind ") + FaultName(static_cast<Fault>(f)) + " injected");
    }
  }
}

/// The load of both phases: the loadgen's statements (short, multi-page, failing).
void ConfigureLoad(SoakState* s) {
  loadgen::Config& c = s->load;
  c.mode = loadgen::Config::Mode::kQueries;
  c.endpoint = s->endpoint;
  c.host = "127.0.0.1:" + std::to_string(s->endpoint.port());
  c.user = "soak";
  c.source = "coordinator-soak";
  c.clients = FLAGS_clients;
  c.request_timeout = kRequestTimeout;
  c.statements = {
      {"SELECT 1", 1, ""},
      {"SELECT n_nationkey, n_name FROM nation ORDER BY n_nationkey", 25, ""},
      {kMultiPageSql, s->lineitem_rows, ""},
      {"SELECT no_such_column FROM nation", -1, "COLUMN_NOT_FOUND"},
      {"SELEC 1", -1, "SYNTAX_ERROR"},
  };
}

bool StartDaemon(SoakState* s, const std::string& work_dir) {
#if QR_SOAK_UNDER_ASAN
  // ASan parks freed memory in a quarantine (256 MiB by default) that fills over minutes and
  // reads as RSS growth; a small one is full before the warm-up ends. The child only.
  const char* asan = std::getenv("ASAN_OPTIONS");
  setenv("ASAN_OPTIONS", ((asan ? std::string(asan) + " " : "") + "quarantine_size_mb=16").c_str(),
         1);
#endif
  const std::vector<std::string> flags = {
      "--data_dir=" + FLAGS_data_dir,
      "--idle_query_timeout_s=" + std::to_string(FLAGS_idle_query_timeout_s),
      "--http_idle_timeout_s=" + std::to_string(FLAGS_http_idle_timeout_s),
      "--max_statement_bytes=" + std::to_string(kMaxStatementBytes),
      "--max_header_bytes=" + std::to_string(kMaxHeaderBytes),
      "--num_query_threads=8", "--max_running_queries=16", "--shutdown_grace_period_s=2",
      // Small budgets, so that the resource attackers (soak-attacks.cc) reach them.
      "--sqlite_heap_limit_mb=" + std::to_string(kSqliteHeapLimitMb),
      "--max_result_memory_mb=" + std::to_string(kResultMemoryMb), "--query_max_memory_mb=32",
      "--query_max_spill_mb=32", "--max_spill_mb=" + std::to_string(kMaxSpillMb),
      "--abandoned_query_timeout_s=3", "--exec_time_limit_s=60"};
  std::string error;
  if (!s->daemon.Start(FLAGS_coordinatord, flags, work_dir + "/coordinatord.log",
                       Clock::now() + kStartTimeout, &error)) {
    s->Fail(error);
    return false;
  }
  s->endpoint = {boost::asio::ip::make_address("127.0.0.1"),
                 static_cast<uint16_t>(s->daemon.port())};
  s->admin = std::make_unique<SoakConnection>(s->endpoint);
  QueryOutcome q = AdminQuery(s, "SELECT count(*) FROM lineitem");
  s->lineitem_rows = q.first_row.size() > 2 ? std::atoll(q.first_row.c_str() + 1) : 0;
  if (q.state != "FINISHED" || s->lineitem_rows <= 0) {
    s->Fail("the first query failed: " + q.state + " " + q.error_name + " " + q.problem);
    return false;
  }
  printf("coordinatord pid %d on port %d; lineitem has %lld rows\n", s->daemon.pid(),
         s->daemon.port(), static_cast<long long>(s->lineitem_rows));
  return true;
}

/// Warm-up, baseline, soak, then every check. Failures are collected in 's->failures'.
void Soak(SoakState* s, double duration_s) {
  const auto drain = Seconds(FLAGS_drain_timeout_s);
  ConfigureLoad(s);
  printf("warm-up: %.0f s\n", FLAGS_warmup_s);
  fflush(stdout);
  if (!RunPhase(s, FLAGS_warmup_s)) return;
  Drain d = WaitDrained(s, Clock::now() + drain);
  if (!d.Empty()) s->Fail("registries not empty after the warm-up: " + d.ToString());
  s->rss_baseline_kb = s->daemon.RssKb();
  if (std::string m; FetchMetrics(s, &m)) {
    s->heap_baseline = MetricSum(m, "qr_allocator_in_use_bytes");
  }
  printf("warm baseline RSS %lld KiB; soak: %.0f s\n",
         static_cast<long long>(s->rss_baseline_kb), duration_s);
  fflush(stdout);
  if (!RunPhase(s, duration_s)) return;
  CheckStillServes(s);
  d = WaitDrained(s, Clock::now() + drain);
  printf("after the soak: %s\n", d.ToString().c_str());
  if (!d.Empty()) s->Fail("registries not empty within the deadline: " + d.ToString());
  std::string metrics;
  if (!FetchMetrics(s, &metrics)) {
    s->Fail("GET /metrics failed: " + s->admin->error());
  } else {
    CheckAccounting(s, metrics);
    CheckBudgets(s, metrics);
  }
  CheckRss(s, Clock::now() + drain);
  CheckConnections(s, Clock::now() + drain);
  PrintReport(*s);
  CheckClients(s);
}

int Main() {
  if (FLAGS_coordinatord.empty() || FLAGS_data_dir.empty()) {
    fprintf(stderr, "coordinator-soak: --coordinatord and --data_dir are required\n");
    return 2;
  }
  double duration_s = FLAGS_duration_s;
  if (const char* env = std::getenv("QR_SOAK_DURATION_S")) duration_s = std::atof(env);
  if (duration_s <= 0 || FLAGS_warmup_s <= 0) {
    fprintf(stderr, "coordinator-soak: the durations must be positive\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  char tmpl[] = "/tmp/qr-soak.XXXXXX";
  const std::string work_dir = mkdtemp(tmpl) ? tmpl : "/tmp";
  SoakState s;
  if (StartDaemon(&s, work_dir)) Soak(&s, duration_s);
  std::string error;
  if (s.daemon.pid() > 0 && !s.daemon.Stop(Clock::now() + std::chrono::seconds(60), &error)) {
    s.Fail("coordinatord on SIGTERM: " + error);
  }
  if (!s.failures.empty()) {
    fprintf(stderr, "coordinator-soak: %zu check(s) failed; the daemon's log ends with:\n%s\n",
            s.failures.size(), s.daemon.LogTail(6000).c_str());
    return 1;
  }
  std::filesystem::remove_all(work_dir);
  printf("coordinator-soak: all checks passed\n");
  return 0;
}

}  // namespace
}  // namespace qr::soak

int main(int argc, char** argv) {
  gflags::SetUsageMessage("coordinator-soak --coordinatord=BINARY --data_dir=DIR [flags]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return qr::soak::Main();
}
