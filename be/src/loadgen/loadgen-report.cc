#include "loadgen/loadgen-report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string_view>

namespace qr::loadgen {
namespace {

using Mode = Config::Mode;

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

/// The samples of the server's /metrics that say what the attackers met (noisy mode): the
/// counters' changes over the run and the gauges at its end.
constexpr std::string_view kNoisyMetrics[] = {
    "qr_queries_finished_total", "qr_queries_failed_total", "qr_queries_canceled_total",
    "qr_queries_rejected_total", "qr_queries_abandoned_total", "qr_result_memory_refusals_total",
    "qr_spill_refusals_total", "qr_spool_quota_waits_total", "qr_result_memory_peak_bytes",
    "qr_sqlite_heap_peak_bytes", "qr_spill_peak_bytes", "qr_queries_in_flight",
    "qr_queries_running", "qr_queries_queued"};

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

}  // namespace

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

namespace {

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

}  // namespace

nlohmann::json ReportJson(const RunInfo& run, const Config& config, const RunStats& s,
                          double seconds, const ServerMeasurement& server, bool measured_server,
                          const MetricsMeasurement& metrics, const rusage& self_before,
                          const rusage& self_after) {
  nlohmann::json j;
  j["label"] = run.label;
  j["mode"] = run.mode;
  j["target"] = config.host;
  j["seconds"] = seconds;
  j["io_threads"] = run.io_threads;
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
    j["server"]["pids"] = run.pids;
  }
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  j["loadgen"] = {{"user_s", tv(self_after.ru_utime) - tv(self_before.ru_utime)},
                  {"sys_s", tv(self_after.ru_stime) - tv(self_before.ru_stime)},
                  {"voluntary_switches", self_after.ru_nvcsw - self_before.ru_nvcsw},
                  {"involuntary_switches", self_after.ru_nivcsw - self_before.ru_nivcsw}};
  return j;
}

namespace {

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

}  // namespace

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

}  // namespace qr::loadgen
