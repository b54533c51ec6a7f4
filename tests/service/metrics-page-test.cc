// GET /metrics: every line is valid Prometheus text exposition format (0.0.4), every family
// is announced by # HELP and # TYPE before its samples, and the counters move as queries run.

#include <regex.h>
#include <stdlib.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "service-test-util.h"

namespace qr::testing {
namespace {

/// The parsed exposition: sample values by "name{labels}", and what went wrong.
struct Exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;  // family -> type
  std::vector<std::string> errors;

  double Get(const std::string& key) const {
    auto it = samples.find(key);
    return it == samples.end() ? -1 : it->second;
  }
  /// The sum over every sample whose key starts with 'prefix'.
  double Sum(const std::string& prefix) const {
    double sum = 0;
    for (const auto& [key, value] : samples) {
      if (key.rfind(prefix, 0) == 0) sum += value;
    }
    return sum;
  }
  int Count(const std::string& prefix) const {
    int n = 0;
    for (const auto& [key, value] : samples) n += key.rfind(prefix, 0) == 0;
    return n;
  }
};

/// A POSIX extended regular expression (regcomp/regexec: no template code, so no
/// -Wmaybe-uninitialized noise from libstdc++'s <regex> in sanitizer builds).
class Regex {
 public:
  explicit Regex(const char* pattern) {
    ok_ = regcomp(&re_, pattern, REG_EXTENDED) == 0;
    EXPECT_TRUE(ok_) << pattern;
  }
  ~Regex() {
    if (ok_) regfree(&re_);
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  /// True when the whole 'line' matches; 'groups' gets the capture groups (empty if unset).
  bool Match(const std::string& line, std::vector<std::string>* groups) const {
    regmatch_t m[10];
    if (!ok_ || regexec(&re_, line.c_str(), 10, m, 0) != 0) return false;
    groups->clear();
    for (const regmatch_t& g : m) {
      groups->push_back(g.rm_so < 0 ? "" : line.substr(g.rm_so, g.rm_eo - g.rm_so));
    }
    return true;
  }

 private:
  regex_t re_;
  bool ok_ = false;
};

// Capture groups: 1 the metric name.
const char* const kHelp = R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) [^ ].*$)";
// Capture groups: 1 the metric name, 2 its type.
const char* const kType = R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)";
// Capture groups: 1 the name, 2 the labels ("{...}" or empty), 6 the value. Label values are
// quoted, with backslash escapes (inside a POSIX bracket expression '\' is literal).
const char* const kSample =
    R"(^([a-zA-Z_:][a-zA-Z0-9_:]*))"
    R"(([{][a-zA-Z_][a-zA-Z0-9_]*="([^"\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\]|\\.)*")*[}])?)"
    R"( (-?[0-9]+([.][0-9]+)?([eE][+-]?[0-9]+)?|[+]Inf|-Inf|NaN)$)";

/// The family a sample belongs to: its own name, or the histogram it is a series of.
std::string FamilyOf(const std::string& name, const Exposition& e) {
  if (e.types.contains(name)) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      std::string base = name.substr(0, name.size() - s.size());
      auto it = e.types.find(base);
      if (it != e.types.end() && it->second == "histogram") return base;
    }
  }
  return "";
}

/// Parses 'text', checking the format line by line and the order HELP, TYPE, samples, with
/// each family's samples contiguous.
Exposition Parse(const std::string& text) {
  Exposition e;
  std::set<std::string> helped, finished;
  std::string current;  // the family whose samples are being read
  const Regex help(kHelp), type(kType), sample(kSample);
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> m;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto error = [&](const std::string& what) {
      e.errors.push_back("line " + std::to_string(n) + ": " + what + ": " + line);
    };
    if (help.Match(line, &m)) {
      if (!helped.insert(m[1]).second) error("second HELP");
      if (!current.empty()) finished.insert(current);
      current = m[1];
    } else if (type.Match(line, &m)) {
      if (m[1] != current) error("TYPE not right after its HELP");
      if (!e.types.emplace(m[1], m[2]).second) error("second TYPE");
    } else if (sample.Match(line, &m)) {
      std::string family = FamilyOf(m[1], e);
      if (family.empty()) error("sample without HELP and TYPE before it");
      if (family != current || finished.contains(family)) error("family not contiguous");
      const std::string& value = m[6];
      e.samples[m[1] + m[2]] = value == "+Inf" ? 1e308 : std::stod(value);
    } else {
      error("not exposition format");
    }
  }
  if (!text.empty() && text.back() != '\n') e.errors.push_back("no final newline");
  return e;
}

class MetricsPageTest : public DefaultServerTest {
 protected:
  static void SetUpTestSuite() {
    setenv("TZ", ":/etc/localtime", /*overwrite=*/0);  // see debug-pages-test.cc
    DefaultServerTest::SetUpTestSuite();
  }
  Exposition Scrape() {
    TestResponse r = TestHttpClient(port_).Get("/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.Header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
    Exposition e = Parse(r.body);
    for (const std::string& error : e.errors) ADD_FAILURE() << error;
    return e;
  }
};

TEST_F(MetricsPageTest, EveryLineIsExpositionFormatWithTheDocumentedFamilies) {
  Exposition e = Scrape();
  for (const char* counter :
       {"qr_queries_submitted_total", "qr_queries_finished_total", "qr_queries_failed_total",
        "qr_queries_canceled_total", "qr_http_responses_total",
        "qr_registry_lock_acquisitions_total", "qr_registry_lock_contended_acquisitions_total",
        "qr_registry_lock_sleeps_total", "qr_registry_lock_bias_revocations_total",
        "qr_shard_lock_biased_reads_total", "qr_shard_lock_membarriers_total",
        "qr_shard_lock_membarrier_fallbacks_total",
        "qr_long_query_parks_total",
        "process_cpu_seconds_total"}) {
    EXPECT_EQ(e.types[counter], "counter") << counter;
  }
  for (const char* gauge :
       {"qr_queries_running", "qr_queries_queued", "qr_registry_entries",
        "qr_registry_largest_shard_entries", "qr_registry_shards_by_entries",
        "process_resident_memory_bytes", "process_open_fds", "process_max_fds",
        "process_start_time_seconds", "qr_long_queries_parked", "qr_build_info"}) {
    EXPECT_EQ(e.types[gauge], "gauge") << gauge;
  }
  EXPECT_EQ(e.types["qr_query_latency_seconds"], "histogram");
  EXPECT_EQ(e.Get("qr_query_latency_seconds_bucket{le=\"0.001\"}"), 0);
  EXPECT_EQ(e.Get("qr_query_latency_seconds_bucket{le=\"300\"}"), 0);
  EXPECT_EQ(e.Get("qr_query_latency_seconds_bucket{le=\"+Inf\"}"), 0);
  // Per registry, not per shard, by default (--metrics_per_shard).
  EXPECT_EQ(e.Count("qr_registry_shard_"), 0);
  EXPECT_EQ(e.Get("qr_registry_entries{registry=\"coordinator\"}"), 0);
  EXPECT_EQ(e.Get("qr_registry_shards{registry=\"executor\"}"),
            server_->exec_mgr()->registry().num_shards());
  EXPECT_EQ(e.Get("qr_registry_shards_by_entries{registry=\"coordinator\",at_most=\"0\"}"),
            server_->coordinator()->registry().num_shards());
  EXPECT_LT(e.samples.size(), 300u);
  EXPECT_GT(e.Get("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(e.Get("process_open_fds"), 3);
  EXPECT_GT(e.Get("process_start_time_seconds"), 1.7e9);
  EXPECT_GE(e.Get("process_threads"), 2);
  EXPECT_EQ(e.Get("qr_long_queries_parked"), 0);
  EXPECT_EQ(e.Get("qr_limit{flag=\"max_long_queries_per_user\"}"),
            server_->options().max_long_queries_per_user);
}

TEST_F(MetricsPageTest, PerShardSeriesOnlyWhenAskedFor) {
  server_->Shutdown(0);
  CoordinatorServer::Options o = DefaultOptions();
  o.metrics_per_shard = true;
  server_ = StartServer(o);
  ASSERT_NE(server_, nullptr);
  port_ = server_->port();
  StatementClient endless(port_);
  endless.Submit(kEndlessQuery);
  ASSERT_TRUE(WaitFor([&] { return server_->coordinator()->GetMetrics().running == 1; }));
  Exposition e = Scrape();
  // One sample per shard of each registry, adding up to the per-registry aggregates.
  const int coordinator_shards = server_->coordinator()->registry().num_shards();
  const int executor_shards = server_->exec_mgr()->registry().num_shards();
  EXPECT_EQ(e.Count("qr_registry_shard_entries{registry=\"coordinator\""), coordinator_shards);
  EXPECT_EQ(e.Count("qr_registry_shard_entries{registry=\"executor\""), executor_shards);
  EXPECT_EQ(e.Count("qr_registry_shard_contended_acquisitions_total{registry=\"executor\""),
            executor_shards);
  EXPECT_EQ(e.Sum("qr_registry_shard_entries{registry=\"coordinator\""), 1);
  EXPECT_EQ(e.Get("qr_registry_entries{registry=\"coordinator\"}"), 1);
  EXPECT_EQ(e.Get("qr_registry_largest_shard_entries{registry=\"coordinator\"}"), 1);
  EXPECT_EQ(e.Get("qr_registry_shards_by_entries{registry=\"coordinator\",at_most=\"0\"}"),
            coordinator_shards - 1);
  EXPECT_EQ(e.Get("qr_registry_shards_by_entries{registry=\"coordinator\",at_most=\"1\"}"),
            coordinator_shards);
  ASSERT_EQ(endless.Cancel().status, 204);
}

TEST_F(MetricsPageTest, CountersMoveAsQueriesRun) {
  Exposition before = Scrape();
  ASSERT_EQ(RunStatement(port_, "SELECT 1").final_state, "FINISHED");
  ASSERT_EQ(RunStatement(port_, "SELECT * FROM no_such_table").final_state, "FAILED");
  StatementClient endless(port_);
  endless.Submit(kEndlessQuery);
  // The executor drops its handle of an ended query after it frees the slot: wait for the
  // two queries before to leave the executor's registry too.
  ASSERT_TRUE(WaitFor([&] {
    return server_->coordinator()->GetMetrics().running == 1 &&
           server_->exec_mgr()->num_live() == 1;
  }));
  Exposition running = Scrape();
  EXPECT_EQ(running.Get("qr_queries_running"), 1);
  EXPECT_EQ(running.Get("qr_registry_entries{registry=\"coordinator\"}"), 1);
  EXPECT_EQ(running.Get("qr_registry_entries{registry=\"executor\"}"), 1);
  ASSERT_EQ(endless.Cancel().status, 204);
  // The execution slot is released once the executor has noticed the cancel.
  ASSERT_TRUE(WaitFor([&] {
    return server_->coordinator()->GetMetrics().running == 0 &&
           server_->exec_mgr()->num_live() == 0;
  }));

  Exposition after = Scrape();
  auto delta = [&](const std::string& key) { return after.Get(key) - before.Get(key); };
  EXPECT_EQ(delta("qr_queries_submitted_total"), 3);
  EXPECT_EQ(delta("qr_queries_finished_total"), 1);
  EXPECT_EQ(delta("qr_queries_failed_total"), 1);
  EXPECT_EQ(delta("qr_queries_canceled_total"), 1);
  EXPECT_EQ(after.Get("qr_queries_running"), 0);
  EXPECT_EQ(delta("qr_query_latency_seconds_count"), 3);
  EXPECT_EQ(delta("qr_query_latency_seconds_bucket{le=\"+Inf\"}"), 3);
  EXPECT_GT(after.Get("qr_query_latency_seconds_sum"), 0);
  EXPECT_GT(delta("qr_http_responses_total{code=\"200\"}"), 3);
  EXPECT_GE(after.Get("qr_http_responses_total{code=\"204\"}"), 1);
  EXPECT_GT(delta("qr_registry_lock_acquisitions_total{registry=\"coordinator\"}"), 3);
  EXPECT_GT(delta("qr_registry_lock_acquisitions_total{registry=\"executor\"}"), 0);
  EXPECT_EQ(after.Get("qr_registry_entries{registry=\"coordinator\"}"), 0);
}

TEST_F(MetricsPageTest, RefusedConnectionsAreCountedByLimit) {
  server_->Shutdown(0);
  CoordinatorServer::Options o = DefaultOptions();
  o.http.max_connections_per_address = 1;
  server_ = StartServer(o);
  ASSERT_NE(server_, nullptr);
  port_ = server_->port();
  Exposition before = Scrape();
  EXPECT_EQ(before.types["qr_http_connections_refused_total"], "counter");
  for (const char* limit : {"max_connections", "max_connections_per_address",
                            "file_descriptors"}) {
    EXPECT_EQ(before.Get(std::string("qr_http_connections_refused_total{limit=\"") + limit +
                         "\"}"),
              0)
        << limit;
  }
  EXPECT_EQ(before.Get("qr_limit{flag=\"max_connections\"}"), 10000);
  EXPECT_EQ(before.Get("qr_limit{flag=\"max_connections_per_address\"}"), 1);
  // A second connection from this address while one is open gets 503.
  ASSERT_TRUE(WaitFor([&] { return server_->webserver()->connections_open() == 0; }));
  TestHttpClient first(port_);
  ASSERT_EQ(first.Get("/v1/info").status, 200);  // Keep-alive: the connection stays open.
  TestResponse refused = TestHttpClient(port_).Get("/v1/info");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(server_->webserver()->connections_refused(
                Webserver::ConnectionLimit::kPerAddress),
            1u);
}

TEST(MetricsParserTest, RejectsMalformedLinesAndSamplesBeforeTheirType) {
  EXPECT_TRUE(Parse("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n").errors.empty());
  EXPECT_TRUE(Parse("# HELP a A.\n# TYPE a gauge\na{x=\"q\\\"u\",y=\"\"} -1.5e3\n")
                  .errors.empty());
  EXPECT_FALSE(Parse("a_total 1\n").errors.empty());
  EXPECT_FALSE(Parse("# HELP a A.\n# TYPE a gauge\na{x=1} 1\n").errors.empty());
  EXPECT_FALSE(Parse("# HELP a A.\n# TYPE a gauge\na one\n").errors.empty());
  EXPECT_FALSE(Parse("# HELP a A.\n# TYPE a gauge\n# HELP b B.\n# TYPE b gauge\nb 1\na 1\n")
                   .errors.empty());
}

}  // namespace
}  // namespace qr::testing
