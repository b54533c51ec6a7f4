#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "loadgen/loadgen-http.h"
#include "loadgen/loadgen-stats.h"

namespace qr::loadgen {

using Clock = std::chrono::steady_clock;

/// A statement of the queries mode and what its result must be.
struct Statement {
  std::string sql;
  /// Rows it must return in total (-1: not checked).
  int64_t expect_rows = -1;
  /// The errorName it must fail with; empty: it must finish.
  std::string expect_error;
};

/// What the attackers of the noisy mode do (docs/benchmarks.md, "Noisy neighbours").
enum class Attack {
  kNone,       // quiet baseline: the well-behaved clients alone
  kNeverPoll,  // POST 'attack_sql' every 'attack_interval', never fetch
  kWideRow,    // run a statement whose one row is too large to encode
  kInstrBomb,  // run instr() on multi-MB strings (quadratic in SQLite's own instr)
  kHugeSort,   // run an ORDER BY over a cross join that spills
  kReget,      // fetch the first page, then GET that answered nextUri again and again
  kSlowFetch,  // fetch the first page, then hold the query without fetching
};
/// "never-poll", "wide-row", ...; ParseAttack() is its inverse.
const char* AttackName(Attack attack);
bool ParseAttack(std::string_view name, Attack* attack);

/// What to run (from the command line).
struct Config {
  enum class Mode { kQueries, kPoll, kMixed, kGet, kNoisy };
  Mode mode = Mode::kQueries;
  boost::asio::ip::tcp::endpoint endpoint;
  std::string host;            // Host header
  std::string user = "loadgen";
  std::string source = "coordinator-loadgen";
  std::string catalog, schema;
  std::string sql = "SELECT 1";
  std::string long_sql;
  /// Rows a statement of 'sql' must return in total (-1: not checked).
  int64_t expect_rows = -1;
  /// If not empty, each query of the queries and mixed modes runs one of these, picked at
  /// random, instead of 'sql' / 'expect_rows'.
  std::vector<Statement> statements;
  int clients = 8;             // statement clients (queries, mixed) or GET clients (get)
  int poll_clients = 64;       // status-lookup clients (poll, mixed)
  int long_queries = 16;       // long-running statements kept in flight (poll, mixed)
  int cancel_clients = 2;      // submit-then-cancel clients (mixed)
  bool poll_next = true;       // poll clients also GET the nextUri of the query they looked up
  std::string poll_max_wait = "0s";
  std::string get_path = "/v1/info";
  unsigned get_expect_status = 200;
  std::chrono::milliseconds request_timeout{60000};
  size_t max_body_bytes = 256u << 20;
  int64_t max_queries = 0;     // stop after this many measured queries (0: duration only)
  int max_requests_per_query = 100000;
  /// Noisy mode: 'clients' run 'sql' as user 'user' beside 'attackers' clients of user
  /// 'attack_user' that run 'attack_sql' as 'attack' says.
  Attack attack = Attack::kNone;
  int attackers = 64;
  std::string attack_user = "attacker";
  std::string attack_sql;
  std::chrono::milliseconds attack_interval{2000};  // between never-poll POSTs of one attacker
  size_t attack_max_body_bytes = 64u << 20;
  /// When the window ends, statement clients cancel the query they are running (its age is
  /// recorded in RunStats::unfinished) instead of running it to its end, and every request
  /// still unanswered 'stop_grace' after the end is abandoned: a starved or wedged server
  /// cannot hold the loadgen.
  bool abandon_at_stop = false;
  std::chrono::milliseconds stop_grace{3000};
};

/// The measurement window and the stop signal, shared by the I/O threads and the main thread.
/// Thread-safety: all members are atomics; relaxed order suffices since each value is a
/// self-contained timestamp or flag, and the final merge happens after the threads are joined.
class RunControl {
 public:
  void SetWindow(Clock::time_point start, Clock::time_point end) {
    start_ns_.store(start.time_since_epoch().count(), std::memory_order_relaxed);
    end_ns_.store(end.time_since_epoch().count(), std::memory_order_relaxed);
  }
  /// Ends the window now (if it has not ended yet) and stops every client after its current
  /// statement.
  void Stop(Clock::time_point now) {
    int64_t n = now.time_since_epoch().count();
    int64_t end = end_ns_.load(std::memory_order_relaxed);
    while (n < end && !end_ns_.compare_exchange_weak(end, n, std::memory_order_relaxed)) {
    }
    stopping_.store(true, std::memory_order_relaxed);
  }
  bool stopping() const { return stopping_.load(std::memory_order_relaxed); }
  Clock::time_point end() const {
    return Clock::time_point(Clock::duration(end_ns_.load(std::memory_order_relaxed)));
  }
  bool InWindow(Clock::time_point t) const {
    int64_t n = t.time_since_epoch().count();
    return n >= start_ns_.load(std::memory_order_relaxed) &&
           n < end_ns_.load(std::memory_order_relaxed);
  }
  /// Counts a measured query; true when --max_queries has just been reached.
  bool CountQuery(int64_t max_queries) {
    return max_queries > 0 && queries_.fetch_add(1, std::memory_order_relaxed) + 1 == max_queries;
  }

 private:
  std::atomic<int64_t> start_ns_{INT64_MAX};
  std::atomic<int64_t> end_ns_{INT64_MAX};
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> queries_{0};
};

class Worker;
class LongQuery;

/// After an error, a client pauses this long before it goes on (no tight error loops).
inline constexpr std::chrono::milliseconds kErrorPause{10};

/// The fields of a QueryResults answer that drive a client.
struct StatementAnswer {
  std::string_view state;
  std::string next;  // origin-form target of nextUri; empty on the final answer
  std::string error_name;
};
StatementAnswer ParseStatement(std::string_view body);

/// A simulated client with one keep-alive connection, driven by its answers.
class Client : public HttpHandler {
 public:
  /// 'worker' (which runs the client on its thread) must outlive the client.
  explicit Client(Worker* worker);
  /// A client whose requests carry 'headers' instead of the worker's common headers (another
  /// user), with bodies of at most 'max_body_bytes'.
  Client(Worker* worker, const std::string& headers, size_t max_body_bytes);
  virtual void Start() = 0;
  bool finished() const { return finished_; }
  HttpConnection& connection() { return conn_; }

 protected:
  void Send(RequestKind kind, std::string_view method, std::string_view target,
            std::string_view body = {}, std::string_view extra_headers = {});
  /// Records the request's latency (inside the window) and any error; false on error.
  bool Account(std::string_view error, const HttpAnswer& answer, unsigned expected_status);
  /// Records an error of this request's kind ("next: query FAILED (SYNTAX_ERROR)").
  void Error(const std::string& what, std::string_view body);
  /// Runs 'fn' after a short pause (after an error: no tight error loops).
  void After(std::chrono::milliseconds delay, void (Client::*fn)());
  /// Reports to the worker that this client has stopped.
  void Finish();

  Worker* const worker_;
  HttpConnection conn_;
  RequestKind kind_ = RequestKind::kGet;
  Clock::time_point sent_;
  boost::asio::steady_timer timer_;
  bool finished_ = false;
};

/// Microseconds from 'a' to 'b'.
inline int64_t MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

/// The clients, one factory per kind; each runs on 'worker', which must outlive it.
/// Runs --sql (or --statements) end to end, again and again (loadgen-query-clients.cc).
std::unique_ptr<Client> MakeQueryClient(Worker* worker);
/// GETs --get_path again and again (loadgen-query-clients.cc).
std::unique_ptr<Client> MakeGetClient(Worker* worker);
/// Polls the worker's long-running queries (loadgen-poll-clients.cc).
std::unique_ptr<Client> MakePollClient(Worker* worker);
/// Submits, fetches once, cancels, checks the cancellation (loadgen-poll-clients.cc).
std::unique_ptr<Client> MakeCancelClient(Worker* worker);
/// An attacker of the noisy mode, of the kind Config::attack (loadgen-attack.cc).
std::unique_ptr<Client> MakeAttackClient(Worker* worker);

/// One I/O thread of the loadgen: its clients, its share of the long-running queries, and its
/// statistics.
/// Thread-safety: everything but ready() and the RunControl runs on the worker's own thread.
class Worker {
 public:
  /// 'run' (shared by every worker) and 'config' must outlive the worker.
  Worker(const Config& config, RunControl* run, int index, int num_workers);
  ~Worker();
  /// Runs until every client has stopped and every long query is canceled.
  void Run();
  /// True once the long-running queries are in flight (immediately if there are none).
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  const Config& config() const { return config_; }
  RunControl* run() { return run_; }
  RunStats& stats() { return stats_; }
  boost::asio::io_context& io() { return io_; }
  std::mt19937_64& rng() { return rng_; }
  /// The headers of every request, and those of a POST /v1/statement.
  const std::string& common_headers() const { return common_headers_; }
  const std::string& post_headers() const { return post_headers_; }
  /// The headers of every request of an attacker (noisy mode).
  const std::string& attack_headers() const { return attack_headers_; }
  /// "?maxWait=..." for nextUri GETs of long-running statements.
  const std::string& max_wait_query() const { return max_wait_query_; }

  /// A random live long-running query, or nullptr if none is live right now.
  LongQuery* PickLongQuery();
  void OnLongQueryLive();
  void OnClientFinished();
  void OnLongQueryCanceled();

 private:
  void Watchdog();

  const Config& config_;
  RunControl* const run_;
  boost::asio::io_context io_;
  RunStats stats_;
  std::mt19937_64 rng_;
  std::string common_headers_, post_headers_, max_wait_query_, attack_headers_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::unique_ptr<LongQuery>> long_queries_;
  int live_long_queries_ = 0;
  int running_clients_ = 0;
  int canceled_long_queries_ = 0;
  bool started_clients_ = false;
  std::atomic<bool> ready_{false};
  boost::asio::steady_timer watchdog_;
};

}  // namespace qr::loadgen
