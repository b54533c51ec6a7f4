// coordinator-loadgen: many Trino-protocol clients on a few asynchronous keep-alive HTTP/1.1
// connections per I/O thread, against a server on loopback (coordinatord, Trino, or nginx as an
// anchor). Reports queries/s, requests/s, latency percentiles by request kind, errors by kind,
// and the server's CPU time, context switches and syscalls per request (from /proc/<pid> and
// perf tracepoint counters). Exits 1 if any request failed. See docs/benchmarks.md.
//
//   coordinator-loadgen --port=8080 --pid=$(pidof coordinatord) --mode=queries --clients=8
//   coordinator-loadgen --port=8080 --pid=... --mode=poll --poll_clients=64 --long_queries=16
//   coordinator-loadgen --port=8080 --pid=... --mode=mixed --duration_s=300
//   coordinator-loadgen --port=8081 --pid=1,2 --mode=get --get_path=/status.json --clients=64
//   coordinator-loadgen --port=8080 --pid=... --mode=noisy --attack=slow-fetch --attackers=64

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <thread>

#include <boost/asio/ip/address.hpp>
#include <gflags/gflags.h>
#include <nlohmann/json.hpp>

#include "loadgen/loadgen-clients.h"
#include "loadgen/loadgen-report.h"
#include "loadgen/loadgen-stats.h"

DEFINE_string(mode, "queries",
              "queries: --clients run --sql end to end; poll: --long_queries stay in flight while "
              "--poll_clients look them up (GET /v1/query/{id}, then their nextUri); mixed: both "
              "plus --cancel_clients that submit and cancel; get: --clients GET --get_path; "
              "noisy: --clients run --sql beside --attackers clients of the --attack kind.");
DEFINE_string(host, "127.0.0.1", "Server address (loopback only).");
DEFINE_int32(port, 8080, "Server port.");
DEFINE_string(pid, "", "Comma-separated pids of the server processes to measure (empty: none).");
DEFINE_string(label, "", "A name for this run in the report (e.g. 'coordinatord sharded').");
DEFINE_string(sql, "SELECT 1", "Statement of the queries and mixed modes.");
DEFINE_string(long_sql,
              "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c",
              "Long-running statement of the poll and mixed modes. The default never ends and, "
              "unread, parks on the server's result backpressure instead of burning a core.");
DEFINE_int64(expect_rows, -1, "Rows each --sql statement must return (-1: not checked).");
DEFINE_string(user, "loadgen", "X-Trino-User.");
DEFINE_string(catalog, "", "X-Trino-Catalog of submitted statements (empty: not sent).");
DEFINE_string(schema, "", "X-Trino-Schema of submitted statements (empty: not sent).");
DEFINE_int32(clients, 8, "Statement clients (queries, mixed) or GET clients (get).");
DEFINE_int32(poll_clients, 64, "Status-lookup clients (poll, mixed).");
DEFINE_int32(long_queries, 16, "Long-running statements kept in flight (poll, mixed).");
DEFINE_int32(cancel_clients, 2, "Submit-then-cancel clients (mixed).");
DEFINE_bool(poll_next, true, "Poll clients also GET the nextUri of the query they looked up.");
DEFINE_string(poll_max_wait, "0s", "maxWait of nextUri GETs of long queries (empty: not sent).");
DEFINE_string(get_path, "/v1/info", "Target of the get mode.");
DEFINE_int32(get_expect_status, 200, "HTTP status the get mode expects.");
DEFINE_double(duration_s, 10, "Measured seconds (after the warm-up).");
DEFINE_double(warmup_s, 2, "Seconds of load before the measurement starts.");
DEFINE_int64(max_queries, 0, "Stop after this many measured statements (0: --duration_s only).");
DEFINE_int32(io_threads, 1, "Loadgen I/O threads (each runs its share of the clients).");
DEFINE_double(request_timeout_s, 60, "A request unanswered for this long is an error.");
DEFINE_double(setup_timeout_s, 180, "Time allowed for the long queries to go live.");
DEFINE_double(rss_sample_s, 1, "How often the server's RSS is sampled during the run.");
DEFINE_bool(count_syscalls, true, "Count the server's syscalls with perf tracepoint counters.");
DEFINE_string(json_out, "", "Also write the report as JSON to this file.");
DEFINE_string(attack, "none",
              "Noisy mode: what the attackers do. none (quiet baseline); never-poll (POST "
              "--attack_sql every --attack_interval_ms, never fetch); wide-row (a 60 x 2 MB row: "
              "values of the default --max_value_mb); instr-bomb (instr on --instr_bomb_bytes "
              "strings); huge-sort (ORDER BY over lineitem x --huge_sort_rows lineitems); reget "
              "(fetch the first page, then GET its nextUri again and again); slow-fetch (fetch "
              "the first page of lineitem, then hold it).");
DEFINE_int32(attackers, 64, "Noisy mode: attacker clients (one connection each).");
DEFINE_string(attack_user, "attacker", "Noisy mode: X-Trino-User of the attackers.");
DEFINE_string(attack_sql, "", "Noisy mode: the attackers' statement (empty: the --attack's own).");
DEFINE_int32(attack_interval_ms, 2000, "Noisy mode, never-poll: pause between one attacker's POSTs.");
DEFINE_int64(instr_bomb_bytes, 2000000, "Noisy mode, instr-bomb: haystack length (the needle is "
             "half of it in 'a's and a 'b').");
DEFINE_int32(huge_sort_rows, 1000, "Noisy mode, huge-sort: lineitem rows crossed with all of "
             "lineitem (1000: ~60M rows, several GB to sort).");
DEFINE_double(stop_grace_s, 3, "Noisy mode: after the window, requests unanswered this long are "
              "abandoned (a wedged server cannot hold the loadgen).");

namespace qr::loadgen {
namespace {

using Mode = Config::Mode;

bool ParseMode(const std::string& s, Mode* mode) {
  if (s == "queries") *mode = Mode::kQueries;
  else if (s == "poll") *mode = Mode::kPoll;
  else if (s == "mixed") *mode = Mode::kMixed;
  else if (s == "get") *mode = Mode::kGet;
  else if (s == "noisy") *mode = Mode::kNoisy;
  else return false;
  return true;
}

bool ParsePids(const std::string& s, std::vector<int>* pids) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0) return false;
    pids->push_back(static_cast<int>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return true;
}

/// The attackers' statement of 'attack' (noisy mode).
std::string AttackSql(Attack attack) {
  switch (attack) {
    case Attack::kWideRow: {
      std::string sql = "SELECT ";
      for (int i = 0; i < 60; ++i) {
        sql += (i > 0 ? ", " : "") + std::string("zeroblob(2000000) c") + std::to_string(i);
      }
      return sql;
    }
    case Attack::kInstrBomb: {
      const std::string n = std::to_string(FLAGS_instr_bomb_bytes);
      const std::string half = std::to_string(FLAGS_instr_bomb_bytes / 2);
      return "SELECT instr(printf('%.*c', " + n + ", 'a'), printf('%.*c', " + half +
             ", 'a') || 'b')";
    }
    case Attack::kHugeSort:
      return "SELECT a.l_orderkey, b.l_orderkey FROM lineitem a, (SELECT l_orderkey, l_comment "
             "FROM lineitem LIMIT " + std::to_string(FLAGS_huge_sort_rows) +
             ") b ORDER BY a.l_comment, b.l_comment";
    case Attack::kNeverPoll:
    case Attack::kReget:
    case Attack::kSlowFetch: return "SELECT * FROM lineitem";
    case Attack::kNone: break;
  }
  return "";
}

bool MakeNoisyConfig(Config* c) {
  if (!ParseAttack(FLAGS_attack, &c->attack)) {
    fprintf(stderr, "--attack must be none, never-poll, wide-row, instr-bomb, huge-sort, reget or "
                    "slow-fetch; got '%s'\n", FLAGS_attack.c_str());
    return false;
  }
  if (FLAGS_attackers < 0 || FLAGS_attack_interval_ms < 0 || FLAGS_instr_bomb_bytes < 2 ||
      FLAGS_huge_sort_rows < 1 || FLAGS_stop_grace_s <= 0 || FLAGS_attack_user == FLAGS_user) {
    fprintf(stderr, "invalid --attackers, --attack_interval_ms, --instr_bomb_bytes, "
                    "--huge_sort_rows or --stop_grace_s, or --attack_user is --user\n");
    return false;
  }
  c->attackers = c->attack == Attack::kNone ? 0 : FLAGS_attackers;
  c->attack_user = FLAGS_attack_user;
  c->attack_sql = FLAGS_attack_sql.empty() ? AttackSql(c->attack) : FLAGS_attack_sql;
  c->attack_interval = std::chrono::milliseconds(FLAGS_attack_interval_ms);
  c->abandon_at_stop = true;
  c->stop_grace = std::chrono::milliseconds(static_cast<int64_t>(FLAGS_stop_grace_s * 1e3));
  return true;
}

/// Builds the configuration from the flags; false (with a message printed) if they are invalid.
bool MakeConfig(Config* c) {
  if (!ParseMode(FLAGS_mode, &c->mode)) {
    fprintf(stderr, "--mode must be queries, poll, mixed, get or noisy; got '%s'\n",
            FLAGS_mode.c_str());
    return false;
  }
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(FLAGS_host, ec);
  if (ec || !address.is_loopback()) {
    fprintf(stderr, "--host must be a loopback address (127.0.0.1, ::1); got '%s'\n",
            FLAGS_host.c_str());
    return false;
  }
  if (FLAGS_port <= 0 || FLAGS_port > 65535 || FLAGS_io_threads < 1 || FLAGS_duration_s <= 0 ||
      FLAGS_warmup_s < 0 || FLAGS_clients < 0 || FLAGS_poll_clients < 0 ||
      FLAGS_cancel_clients < 0) {
    fprintf(stderr, "invalid --port, --io_threads, --duration_s, --warmup_s or client count\n");
    return false;
  }
  bool polls = c->mode == Mode::kPoll || c->mode == Mode::kMixed;
  if (polls && FLAGS_long_queries < FLAGS_io_threads) {
    fprintf(stderr, "--long_queries must be at least --io_threads in the %s mode\n",
            FLAGS_mode.c_str());
    return false;
  }
  c->endpoint = boost::asio::ip::tcp::endpoint(address, static_cast<uint16_t>(FLAGS_port));
  c->host = (address.is_v6() ? "[" + FLAGS_host + "]" : FLAGS_host) + ":" +
            std::to_string(FLAGS_port);
  c->user = FLAGS_user;
  c->catalog = FLAGS_catalog;
  c->schema = FLAGS_schema;
  c->sql = FLAGS_sql;
  c->long_sql = FLAGS_long_sql;
  c->expect_rows = FLAGS_expect_rows;
  c->clients = FLAGS_clients;
  c->poll_clients = FLAGS_poll_clients;
  c->long_queries = polls ? FLAGS_long_queries : 0;
  c->cancel_clients = FLAGS_cancel_clients;
  c->poll_next = FLAGS_poll_next;
  c->poll_max_wait = FLAGS_poll_max_wait;
  c->get_path = FLAGS_get_path;
  c->get_expect_status = static_cast<unsigned>(FLAGS_get_expect_status);
  c->request_timeout = std::chrono::milliseconds(static_cast<int64_t>(FLAGS_request_timeout_s * 1e3));
  c->max_queries = FLAGS_max_queries;
  return c->mode != Mode::kNoisy || MakeNoisyConfig(c);
}

std::chrono::nanoseconds Seconds(double s) {
  return std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9));
}

bool WaitReady(const std::vector<std::unique_ptr<Worker>>& workers) {
  Clock::time_point deadline = Clock::now() + Seconds(FLAGS_setup_timeout_s);
  while (Clock::now() < deadline) {
    bool all = std::all_of(workers.begin(), workers.end(), [](auto& w) { return w->ready(); });
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// Sleeps through the window, sampling the server's RSS; returns when the window ends.
void WaitWindow(RunControl* run, Clock::time_point end, const std::vector<int>& pids,
                ServerMeasurement* m) {
  Clock::time_point next_sample = Clock::now() + Seconds(FLAGS_rss_sample_s);
  const auto step = FLAGS_max_queries > 0 ? std::chrono::milliseconds(5)
                                          : std::chrono::milliseconds(100);
  Clock::time_point now;
  while (!run->stopping() && (now = Clock::now()) < end) {
    if (!pids.empty() && now >= next_sample) {
      m->rss_kb.push_back(ReadRssKb(pids));
      next_sample += Seconds(FLAGS_rss_sample_s);
    }
    Clock::time_point wake = std::min(end, now + step);
    if (!pids.empty()) wake = std::min(wake, next_sample);
    std::this_thread::sleep_until(wake);
  }
}

int Main() {
  Config config;
  std::vector<int> pids;
  if (!MakeConfig(&config)) return 2;
  if (!ParsePids(FLAGS_pid, &pids)) {
    fprintf(stderr, "--pid must be a comma-separated list of process ids; got '%s'\n",
            FLAGS_pid.c_str());
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  MetricsMeasurement metrics;
  const bool noisy = config.mode == Mode::kNoisy;
  if (noisy && !ScrapeMetrics(config, &metrics.before, &metrics.error)) {
    fprintf(stderr, "coordinator-loadgen: %s\n", metrics.error.c_str());
  }
  RunControl run;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < FLAGS_io_threads; ++i) {
    workers.push_back(std::make_unique<Worker>(config, &run, i, FLAGS_io_threads));
  }
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w->Run(); });

  int rc = 0;
  ServerMeasurement server;
  rusage self_before{}, self_after{};
  double seconds = 0;
  if (!WaitReady(workers)) {
    fprintf(stderr, "coordinator-loadgen: the long-running queries did not all go live within "
                    "%.0f s (--setup_timeout_s)\n", FLAGS_setup_timeout_s);
    run.Stop(Clock::now());
    rc = 1;
  } else {
    const Clock::time_point start = Clock::now() + Seconds(FLAGS_warmup_s);
    const Clock::time_point end = start + Seconds(FLAGS_duration_s);
    run.SetWindow(start, end);
    std::this_thread::sleep_until(start);
    SyscallCounter syscalls;
    if (!pids.empty()) {
      if (!FLAGS_count_syscalls) {
        server.syscalls_error = "disabled (--count_syscalls=false)";
      } else if (!syscalls.Start(pids, &server.syscalls_error)) {
        fprintf(stderr, "coordinator-loadgen: not counting syscalls: %s\n",
                server.syscalls_error.c_str());
      }
      server.before = ReadProcSample(pids);
    }
    getrusage(RUSAGE_SELF, &self_before);
    WaitWindow(&run, end, pids, &server);
    Clock::time_point stop = std::min(Clock::now(), end);
    run.Stop(stop);
    getrusage(RUSAGE_SELF, &self_after);
    if (noisy && metrics.error.empty()) ScrapeMetrics(config, &metrics.after, &metrics.error);
    if (!pids.empty()) {
      server.syscalls = syscalls.Read();
      server.after = ReadProcSample(pids);
    }
    seconds = std::chrono::duration<double>(stop - start).count();
  }
  for (auto& t : threads) t.join();

  RunStats total;
  for (auto& w : workers) total.Merge(w->stats());
  const RunInfo run_info{FLAGS_label, FLAGS_mode, FLAGS_io_threads, FLAGS_pid};
  nlohmann::json report = ReportJson(run_info, config, total, seconds, server, !pids.empty(),
                                     metrics, self_before, self_after);
  PrintReport(report);
  if (!FLAGS_json_out.empty()) {
    std::ofstream out(FLAGS_json_out);
    out << report.dump(1) << "\n";
    if (!out) {
      fprintf(stderr, "coordinator-loadgen: cannot write %s\n", FLAGS_json_out.c_str());
      rc = 2;
    }
  }
  if (report["error_count"].get<int64_t>() > 0 || total.total_requests() == 0) rc = std::max(rc, 1);
  return rc;
}

}  // namespace
}  // namespace qr::loadgen

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "coordinator-loadgen --port=P [--pid=PID] [--mode=queries|poll|mixed|get|noisy] [flags]: "
      "Trino-protocol load against a server on loopback");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return qr::loadgen::Main();
}
