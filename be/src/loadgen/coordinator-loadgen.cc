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
              "--attack_sql every --attack_interval_ms, never fetch); wide-row (a 60 x 16 MB row); "
              "instr-bomb (instr on --instr_bomb_bytes strings); huge-sort (ORDER BY over lineitem "
              "x --huge_sort_rows lineitems); reget (fetch the first page, then GET its nextUri "
              "again and again); slow-fetch (fetch the first page of lineitem, then hold it).");
DEFINE_int32(attackers, 64, "Noisy mode: attacker clients (one connection each).");
DEFINE_string(attack_user, "attacker", "Noisy mode: X-Trino-User of the attackers.");
DEFINE_string(attack_sql, "", "Noisy mode: the attackers' statement (empty: the --attack's own).");
DEFINE_int32(attack_interval_ms, 2000, "Noisy mode, never-poll: pause between one attacker's POSTs.");
DEFINE_int64(instr_bomb_bytes, 8000000, "Noisy mode, instr-bomb: haystack length (the needle is "
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
        sql += (i > 0 ? ", " : "") + std::string("zeroblob(16000000) c") + std::to_string(i);
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

/// The server side of a run: /proc before and after, RSS over time, syscalls.
struct ServerMeasurement {
  ProcSample before, after;
  std::vector<int64_t> rss_kb;  // sampled during the window
  int64_t syscalls = -1;
  std::string syscalls_error;
};

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

/// The samples of the server's /metrics that say what the attackers met (noisy mode): the
/// counters' changes over the run and the gauges at its end.
constexpr std::string_view kNoisyMetrics[] = {
    "qr_queries_finished_total", "qr_queries_failed_total", "qr_queries_canceled_total",
    "qr_queries_rejected_total", "qr_queries_abandoned_total", "qr_result_memory_refusals_total",
    "qr_spill_refusals_total", "qr_spool_quota_waits_total", "qr_result_memory_peak_bytes",
    "qr_sqlite_heap_peak_bytes", "qr_spill_peak_bytes", "qr_queries_in_flight",
    "qr_queries_running", "qr_queries_queued"};

struct MetricsMeasurement {
  std::map<std::string, double> before, after;  // "name{labels}" -> value
  std::string error;
};

/// Receives the answer of the one request of ScrapeMetrics().
class OneAnswer : public HttpHandler {
 public:
  void OnHttp(std::string_view error, const HttpAnswer& answer) override {
    error_ = error;
    status_ = answer.status;
    body_ = answer.body;
    done_ = true;
  }
  std::string error_, body_;
  unsigned status_ = 0;
  bool done_ = false;
};

/// The kNoisyMetrics samples of GET /metrics; false (with 'error' set) if the server does not
/// answer 200 within 3 s.
bool ScrapeMetrics(const Config& c, std::map<std::string, double>* out, std::string* error) {
  boost::asio::io_context io;
  OneAnswer answer;
  HttpConnection conn(io, c.endpoint, c.host, "X-Trino-User: " + c.user + "\r\n", 16u << 20,
                      &answer);
  conn.Send("GET", "/metrics");
  io.run_for(std::chrono::seconds(3));
  if (!answer.done_) {
    conn.ExpireIfSentBefore(Clock::now());
    io.restart();
    io.run();
  }
  if (!answer.error_.empty() || answer.status_ != 200) {
    *error = "GET /metrics: " + (answer.error_.empty() ? "HTTP " + std::to_string(answer.status_)
                                                      : answer.error_);
    return false;
  }
  std::istringstream lines(answer.body_);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.rfind(' ');
    if (line.empty() || line[0] == '#' || space == std::string::npos) continue;
    const std::string name = line.substr(0, space);
    const std::string_view family = std::string_view(name).substr(0, name.find('{'));
    if (std::find(std::begin(kNoisyMetrics), std::end(kNoisyMetrics), family) !=
        std::end(kNoisyMetrics)) {
      (*out)[name] = std::strtod(line.c_str() + space + 1, nullptr);
    }
  }
  return true;
}

/// What the well-behaved clients saw, what the attackers got, and the server's counters.
nlohmann::json NoisyJson(const Config& c, const RunStats& s, double seconds,
                         const MetricsMeasurement& m) {
  Histogram good = s.queries;  // unfinished queries count with their age at the end
  good.Merge(s.unfinished);
  nlohmann::json j;
  j["attack"] = AttackName(c.attack);
  j["attackers"] = c.attackers;
  j["attack_user"] = c.attack_user;
  j["attack_sql"] = c.attack_sql;
  j["good"] = {{"clients", c.clients}, {"completed", s.queries.count()},
               {"queries_per_s", Ratio(s.queries.count(), seconds)},
               {"unfinished", s.unfinished.count()}, {"unfinished_max_us", s.unfinished.max()},
               {"p50_us", good.Percentile(0.5)}, {"p99_us", good.Percentile(0.99)},
               {"max_us", good.max()}};
  j["attack_requests"] = s.attack_requests;
  j["attack_outcomes"] = s.attack_outcomes;
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [name, after] : m.after) {
    const bool counter = name.substr(0, name.find('{')).ends_with("_total");
    auto before = m.before.find(name);
    metrics[name] = counter ? after - (before == m.before.end() ? 0 : before->second) : after;
  }
  j["server_metrics"] = metrics;
  if (!m.error.empty()) j["server_metrics_error"] = m.error;
  return j;
}

nlohmann::json HistogramJson(const Histogram& h, double seconds) {
  return {{"count", h.count()}, {"per_s", Ratio(h.count(), seconds)},
          {"mean_us", h.mean()}, {"p50_us", h.Percentile(0.5)}, {"p90_us", h.Percentile(0.9)},
          {"p99_us", h.Percentile(0.99)}, {"max_us", h.max()}};
}

nlohmann::json ServerJson(const ServerMeasurement& m, int64_t requests, int64_t queries) {
  nlohmann::json j;
  if (!m.before.ok || !m.after.ok) {
    j["error"] = m.before.ok ? m.after.error : m.before.error;
    return j;
  }
  double user = m.after.user_s - m.before.user_s, sys = m.after.sys_s - m.before.sys_s;
  int64_t vol = m.after.voluntary_switches - m.before.voluntary_switches;
  int64_t invol = m.after.involuntary_switches - m.before.involuntary_switches;
  j["user_s"] = user;
  j["sys_s"] = sys;
  j["voluntary_switches"] = vol;
  j["involuntary_switches"] = invol;
  j["threads"] = m.after.threads;
  auto per = [&](double v, int64_t n) { return n > 0 ? v / static_cast<double>(n) : 0.0; };
  j["per_request"] = {{"user_us", per(user * 1e6, requests)}, {"sys_us", per(sys * 1e6, requests)},
                      {"voluntary_switches", per(vol, requests)},
                      {"involuntary_switches", per(invol, requests)},
                      {"switches", per(vol + invol, requests)}};
  j["per_query"] = {{"user_us", per(user * 1e6, queries)}, {"sys_us", per(sys * 1e6, queries)},
                    {"switches", per(vol + invol, queries)}};
  if (m.syscalls >= 0) {
    j["syscalls"] = m.syscalls;
    j["per_request"]["syscalls"] = per(m.syscalls, requests);
    j["per_query"]["syscalls"] = per(m.syscalls, queries);
  } else {
    j["syscalls_error"] = m.syscalls_error;
  }
  nlohmann::json by_thread = nlohmann::json::object();
  for (const auto& [name, n] : m.after.switches_by_thread) {
    auto it = m.before.switches_by_thread.find(name);
    int64_t delta = n - (it == m.before.switches_by_thread.end() ? 0 : it->second);
    by_thread[name] = per(delta, requests);
  }
  j["switches_per_request_by_thread"] = by_thread;
  int64_t rss_min = m.after.rss_kb, rss_max = m.after.rss_kb;
  for (int64_t kb : m.rss_kb) {
    rss_min = std::min(rss_min, kb);
    rss_max = std::max(rss_max, kb);
  }
  j["rss_kb"] = {{"before", m.before.rss_kb}, {"after", m.after.rss_kb}, {"min", rss_min},
                 {"max", rss_max}, {"peak_hwm", m.after.hwm_kb}, {"samples", m.rss_kb}};
  return j;
}

nlohmann::json ReportJson(const Config& config, const RunStats& s, double seconds,
                          const ServerMeasurement& server, bool measured_server,
                          const MetricsMeasurement& metrics, const rusage& self_before,
                          const rusage& self_after) {
  nlohmann::json j;
  j["label"] = FLAGS_label;
  j["mode"] = FLAGS_mode;
  j["target"] = config.host;
  j["seconds"] = seconds;
  j["io_threads"] = FLAGS_io_threads;
  j["clients"] = {{"statement_or_get", config.mode == Mode::kPoll ? 0 : config.clients},
                  {"poll", config.mode == Mode::kPoll || config.mode == Mode::kMixed
                               ? config.poll_clients : 0},
                  {"long_queries", config.long_queries},
                  {"cancel", config.mode == Mode::kMixed ? config.cancel_clients : 0}};
  if (config.mode == Mode::kQueries || config.mode == Mode::kMixed || config.mode == Mode::kNoisy) {
    j["sql"] = config.sql;
  }
  if (config.mode == Mode::kNoisy) j["noisy"] = NoisyJson(config, s, seconds, metrics);
  if (config.long_queries > 0) j["long_sql"] = config.long_sql;
  if (config.mode == Mode::kGet) j["get_path"] = config.get_path;
  const int64_t requests = s.total_requests();
  j["requests"] = requests;
  j["requests_per_s"] = Ratio(requests, seconds);
  j["queries"] = s.queries.count();
  j["queries_per_s"] = Ratio(s.queries.count(), seconds);
  j["requests_per_query"] = Ratio(s.query_requests, s.queries.count());
  j["max_requests_per_query"] = s.max_requests_per_query;
  j["rows"] = s.rows;
  j["response_bytes_per_request"] = Ratio(s.response_bytes, requests);
  j["query_latency"] = HistogramJson(s.queries, seconds);
  if (s.cancels.count() > 0) j["cancel_cycle_latency"] = HistogramJson(s.cancels, seconds);
  nlohmann::json by_kind = nlohmann::json::object();
  for (int k = 0; k < static_cast<int>(RequestKind::kNumKinds); ++k) {
    if (s.requests[k].count() > 0) {
      by_kind[RequestKindName(static_cast<RequestKind>(k))] = HistogramJson(s.requests[k], seconds);
    }
  }
  j["request_latency"] = by_kind;
  Histogram all;
  for (const Histogram& h : s.requests) all.Merge(h);
  j["request_latency_all"] = HistogramJson(all, seconds);
  j["long_query_resubmits"] = s.long_query_resubmits;
  j["cancel_followups_evicted"] = s.cancel_followups_evicted;
  j["connection_retries"] = s.connection_retries;
  j["errors"] = s.errors;
  j["error_count"] = 0;
  for (const auto& [kind, n] : s.errors) j["error_count"] = j["error_count"].get<int64_t>() + n;
  j["error_examples"] = s.error_examples;
  if (measured_server) {
    j["server"] = ServerJson(server, requests, s.queries.count());
    j["server"]["pids"] = FLAGS_pid;
  }
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  j["loadgen"] = {{"user_s", tv(self_after.ru_utime) - tv(self_before.ru_utime)},
                  {"sys_s", tv(self_after.ru_stime) - tv(self_before.ru_stime)},
                  {"voluntary_switches", self_after.ru_nvcsw - self_before.ru_nvcsw},
                  {"involuntary_switches", self_after.ru_nivcsw - self_before.ru_nivcsw}};
  return j;
}

void PrintLatency(const char* name, const nlohmann::json& h) {
  printf("  %-8s %9lld  %9.1f/s  p50 %7lld  p90 %7lld  p99 %7lld  max %8lld us\n", name,
         static_cast<long long>(h["count"].get<int64_t>()), h["per_s"].get<double>(),
         static_cast<long long>(h["p50_us"].get<int64_t>()),
         static_cast<long long>(h["p90_us"].get<int64_t>()),
         static_cast<long long>(h["p99_us"].get<int64_t>()),
         static_cast<long long>(h["max_us"].get<int64_t>()));
}

double Millis(const nlohmann::json& us) { return us.get<int64_t>() / 1e3; }

void PrintNoisy(const nlohmann::json& n) {
  const auto& g = n["good"];
  printf("  noisy: attack %s, %d attackers as '%s' (%lld requests); good clients (%d): %lld "
         "queries (%.1f/s), p50 %.1f ms, p99 %.1f ms, max %.1f ms; %lld unfinished at the end "
         "(oldest %.1f ms, counted at that age)\n",
         n["attack"].get<std::string>().c_str(), n["attackers"].get<int>(),
         n["attack_user"].get<std::string>().c_str(),
         static_cast<long long>(n["attack_requests"].get<int64_t>()), g["clients"].get<int>(),
         static_cast<long long>(g["completed"].get<int64_t>()), g["queries_per_s"].get<double>(),
         Millis(g["p50_us"]), Millis(g["p99_us"]), Millis(g["max_us"]),
         static_cast<long long>(g["unfinished"].get<int64_t>()), Millis(g["unfinished_max_us"]));
  for (const auto& [outcome, count] : n["attack_outcomes"].items()) {
    printf("    attackers %8lld  %s\n", static_cast<long long>(count.get<int64_t>()),
           outcome.c_str());
  }
  for (const auto& [name, v] : n["server_metrics"].items()) {
    if (v.get<double>() != 0) printf("    server %s %.0f\n", name.c_str(), v.get<double>());
  }
  if (n.contains("server_metrics_error")) {
    printf("    server metrics: %s\n", n["server_metrics_error"].get<std::string>().c_str());
  }
}

void PrintReport(const nlohmann::json& j) {
  const std::string label = j["label"].get<std::string>();
  printf("coordinator-loadgen%s%s: mode %s against %s for %.1f s\n", label.empty() ? "" : " ",
         label.c_str(), j["mode"].get<std::string>().c_str(),
         j["target"].get<std::string>().c_str(), j["seconds"].get<double>());
  printf("  requests %lld (%.1f/s, %.0f body bytes each)", static_cast<long long>(j["requests"].get<int64_t>()),
         j["requests_per_s"].get<double>(), j["response_bytes_per_request"].get<double>());
  if (j["queries"].get<int64_t>() > 0) {
    printf("; queries %lld (%.1f/s, %.2f requests each, at most %lld)",
           static_cast<long long>(j["queries"].get<int64_t>()), j["queries_per_s"].get<double>(),
           j["requests_per_query"].get<double>(),
           static_cast<long long>(j["max_requests_per_query"].get<int64_t>()));
  }
  printf("\n  latency:    count       rate\n");
  if (j["queries"].get<int64_t>() > 0) PrintLatency("query", j["query_latency"]);
  if (j.contains("cancel_cycle_latency")) PrintLatency("cancel*", j["cancel_cycle_latency"]);
  for (const auto& [kind, h] : j["request_latency"].items()) PrintLatency(kind.c_str(), h);
  PrintLatency("all", j["request_latency_all"]);
  if (j.contains("noisy")) PrintNoisy(j["noisy"]);
  if (j.contains("server")) {
    const auto& s = j["server"];
    if (s.contains("error")) {
      printf("  server: %s\n", s["error"].get<std::string>().c_str());
    } else {
      const auto& r = s["per_request"];
      printf("  server cpu: user %.2f s, sys %.2f s (%.1f%% of a core); per request: user %.1f us, "
             "sys %.1f us, switches %.3f (vol %.3f, invol %.3f)",
             s["user_s"].get<double>(), s["sys_s"].get<double>(),
             100 * (s["user_s"].get<double>() + s["sys_s"].get<double>()) / j["seconds"].get<double>(),
             r["user_us"].get<double>(), r["sys_us"].get<double>(), r["switches"].get<double>(),
             r["voluntary_switches"].get<double>(), r["involuntary_switches"].get<double>());
      if (r.contains("syscalls")) printf(", syscalls %.2f", r["syscalls"].get<double>());
      printf("\n");
      if (j["queries"].get<int64_t>() > 0) {
        const auto& q = s["per_query"];
        printf("  server per query: user %.1f us, sys %.1f us, switches %.2f", q["user_us"].get<double>(),
               q["sys_us"].get<double>(), q["switches"].get<double>());
        if (q.contains("syscalls")) printf(", syscalls %.1f", q["syscalls"].get<double>());
        printf("\n");
      }
      if (s.contains("syscalls_error")) {
        printf("  server syscalls not counted: %s\n", s["syscalls_error"].get<std::string>().c_str());
      }
      printf("  server switches per request by thread:");
      for (const auto& [name, v] : s["switches_per_request_by_thread"].items()) {
        if (v.get<double>() >= 0.0005) printf(" %s %.3f", name.c_str(), v.get<double>());
      }
      const auto& rss = s["rss_kb"];
      printf("\n  server RSS: %.1f MiB before, %.1f MiB after (%.1f..%.1f during), peak %.1f MiB, "
             "%d threads\n", rss["before"].get<int64_t>() / 1024.0, rss["after"].get<int64_t>() / 1024.0,
             rss["min"].get<int64_t>() / 1024.0, rss["max"].get<int64_t>() / 1024.0,
             rss["peak_hwm"].get<int64_t>() / 1024.0, s["threads"].get<int>());
    }
  }
  const auto& l = j["loadgen"];
  printf("  loadgen cpu: user %.2f s, sys %.2f s, switches %lld vol / %lld invol\n",
         l["user_s"].get<double>(), l["sys_s"].get<double>(),
         static_cast<long long>(l["voluntary_switches"].get<int64_t>()),
         static_cast<long long>(l["involuntary_switches"].get<int64_t>()));
  if (j["cancel_followups_evicted"].get<int64_t>() > 0 || j["long_query_resubmits"].get<int64_t>() > 0 ||
      j["connection_retries"].get<int64_t>() > 0) {
    printf("  long query resubmits %lld, cancel follow-ups already evicted %lld, requests resent "
           "after an idle connection was closed %lld\n",
           static_cast<long long>(j["long_query_resubmits"].get<int64_t>()),
           static_cast<long long>(j["cancel_followups_evicted"].get<int64_t>()),
           static_cast<long long>(j["connection_retries"].get<int64_t>()));
  }
  if (j["error_count"].get<int64_t>() == 0) {
    printf("  errors: none\n");
  } else {
    printf("  ERRORS: %lld\n", static_cast<long long>(j["error_count"].get<int64_t>()));
    for (const auto& [kind, n] : j["errors"].items()) {
      printf("    %8lld  %s\n", static_cast<long long>(n.get<int64_t>()), kind.c_str());
    }
    for (const auto& e : j["error_examples"]) printf("    e.g. %s\n", e.get<std::string>().c_str());
  }
  fflush(stdout);
}

/// Waits until every worker is ready (its long queries are live), or the setup time is up.
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
  nlohmann::json report = ReportJson(config, total, seconds, server, !pids.empty(), metrics,
                                     self_before, self_after);
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
