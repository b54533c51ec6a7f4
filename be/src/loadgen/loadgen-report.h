#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/loadgen-clients.h"
#include "loadgen/loadgen-stats.h"

/// coordinator-loadgen's report: what the server's /proc and /metrics said over the run, and
/// the JSON and text renderings of a run (docs/benchmarks.md explains the fields).
/// Thread-safety: none; the main thread builds and prints the report after the run.

namespace qr::loadgen {

/// The server side of a run: /proc before and after, RSS over time, syscalls.
struct ServerMeasurement {
  ProcSample before, after;
  std::vector<int64_t> rss_kb;  // sampled during the window
  int64_t syscalls = -1;
  std::string syscalls_error;
};

struct MetricsMeasurement {
  std::map<std::string, double> before, after;  // "name{labels}" -> value
  std::string error;
};

/// What identifies a run in its report (the command line's --label, --mode, --io_threads and
/// --pid).
struct RunInfo {
  std::string label;
  std::string mode;
  int io_threads = 1;
  std::string pids;
};

/// The noisy mode's /metrics samples (counters and gauges that say what the attackers met) of
/// GET /metrics on 'c''s server; false (with '*error' set) if it does not answer 200 within 3 s.
bool ScrapeMetrics(const Config& c, std::map<std::string, double>* out, std::string* error);

/// The whole run as JSON: clients, latencies by request kind, errors, the server's CPU,
/// context switches, syscalls and RSS, the loadgen's own CPU, and the noisy mode's section.
nlohmann::json ReportJson(const RunInfo& run, const Config& config, const RunStats& s,
                          double seconds, const ServerMeasurement& server, bool measured_server,
                          const MetricsMeasurement& metrics, const rusage& self_before,
                          const rusage& self_after);

/// Prints ReportJson()'s report as text on stdout.
void PrintReport(const nlohmann::json& j);

}  // namespace qr::loadgen
