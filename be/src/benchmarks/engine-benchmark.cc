// Per-query overhead of the execution engine: a QueryExecMgr and a SqliteEngine over the
// generated TPC-H sample database (scale factor 0.01, in a temporary directory).
//
//   BM_SelectOne      SELECT 1, from Execute() to the last row consumed (1 and 4 clients)
//   BM_TpchQ1         TPC-H Q1 (a scan and aggregate of ~60k lineitem rows)
//   BM_ScanLineitem   SELECT * FROM lineitem: ~60k rows of 16 columns encoded into pages
//                     (the per-row cost: size check, encoding, pages)
//   BM_CancelLatency  from Cancel() of a running recursive CTE until a waiter, woken by the
//                     end of its result stream, sees exec_state kCancelled
//
// Run: build/release/be/src/benchmarks/engine-benchmark --benchmark_repetitions=5
//      --benchmark_report_aggregates_only=true

#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <benchmark/benchmark.h>

#include "runtime/query-exec-mgr.h"
#include "runtime/sample-db.h"
#include "runtime/sqlite-engine.h"
#include "util/mutex.h"

namespace qr {
namespace {

constexpr const char* kQ1 =
    "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, "
    "sum(l_extendedprice) AS sum_base_price, "
    "sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, "
    "sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, "
    "avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, "
    "avg(l_discount) AS avg_disc, count(*) AS count_order "
    "FROM lineitem WHERE l_shipdate <= date('1998-12-01', '-90 day') "
    "GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus";
constexpr const char* kEndless =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

/// The sample database in a temporary directory, and an engine over it.
class Environment {
 public:
  Environment() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "qr-engine-benchmark.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir_ = tmpl;
    std::string path;
    Status st = EnsureSampleDatabase(dir_, 0.01, &path);
    if (st.ok()) st = SqliteEngine::Create({path, 2}, &engine_);
    if (!st.ok()) {
      std::fprintf(stderr, "setup failed: %s\n", st.ToString().c_str());
      std::abort();
    }
  }
  ~Environment() {
    engine_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  QueryExecMgr* mgr() { return &mgr_; }
  SqliteEngine* engine() { return engine_.get(); }

 private:
  std::string dir_;
  QueryExecMgr mgr_{64};
  std::unique_ptr<SqliteEngine> engine_;
};

Environment* g_env = nullptr;

/// Wakes a consumer when its query's buffer changes (the coordinator's waiter, in small).
class Waiter {
 public:
  void Notify() {
    MutexLock l(&mu_);
    ++changes_;
    cv_.NotifyOne();
  }
  uint64_t changes() {
    MutexLock l(&mu_);
    return changes_;
  }
  void WaitPast(uint64_t seen) {
    MutexLock l(&mu_);
    while (changes_ <= seen) cv_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  uint64_t changes_ QR_GUARDED_BY(mu_) = 0;
};

QueryStateHandle Submit(const std::shared_ptr<const std::string>& sql,
                        std::shared_ptr<Waiter>* waiter) {
  QueryContext ctx;
  ctx.statement = sql;  // shared, never copied
  ctx.user = "bench";
  QueryStateHandle query;
  if (!g_env->mgr()->CreateQueryState(GenerateQueryId(), std::move(ctx), &query).ok()) {
    std::abort();
  }
  if (waiter != nullptr) {
    *waiter = std::make_shared<Waiter>();
    query->result_buffer()->SetOnChange([w = *waiter] { w->Notify(); });
  }
  g_env->engine()->Execute(query.Clone());
  return query;
}

/// Runs 'sql' and consumes every page; returns the number of rows.
int64_t RunQuery(const std::shared_ptr<const std::string>& sql) {
  std::shared_ptr<Waiter> waiter;
  QueryStateHandle query = Submit(sql, &waiter);
  int64_t rows = 0;
  for (;;) {
    const uint64_t seen = waiter->changes();
    ResultPage page;
    std::optional<QueryError> error;
    switch (query->result_buffer()->TryGet(&page, &error)) {
      case ResultBuffer::Next::kPage:
        rows += page.num_rows;
        break;
      case ResultBuffer::Next::kEnd:
        if (error.has_value()) std::abort();
        return rows;
      case ResultBuffer::Next::kNotYet:
        waiter->WaitPast(seen);
        break;
    }
  }
}

void BM_SelectOne(benchmark::State& state) {
  auto sql = std::make_shared<const std::string>("SELECT 1");
  for (auto _ : state) benchmark::DoNotOptimize(RunQuery(sql));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SelectOne)->UseRealTime()->Threads(1)->Threads(4);

void BM_TpchQ1(benchmark::State& state) {
  auto sql = std::make_shared<const std::string>(kQ1);
  for (auto _ : state) {
    if (RunQuery(sql) != 4) std::abort();
  }
}
BENCHMARK(BM_TpchQ1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ScanLineitem(benchmark::State& state) {
  auto sql = std::make_shared<const std::string>("SELECT * FROM lineitem");
  int64_t rows = 0;
  for (auto _ : state) {
    rows = RunQuery(sql);
    if (rows < 50000) std::abort();
  }
  state.SetItemsProcessed(state.iterations() * rows);
}
BENCHMARK(BM_ScanLineitem)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CancelLatency(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  auto sql = std::make_shared<const std::string>(kEndless);
  double total_ms = 0;
  for (auto _ : state) {
    std::shared_ptr<Waiter> waiter;
    QueryStateHandle query = Submit(sql, &waiter);
    // Let it run for 2 ms so that it is deep in the statement, not starting up.
    while (query->exec_state() != QueryState::ExecState::kRunning) std::this_thread::yield();
    while (Clock::now() - query->exec_start() < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    }
    const auto start = Clock::now();
    query->Cancel(QueryError::UserCanceled());
    // Sleep until the buffer's finish notification, as the coordinator does: a spinning
    // measurer would take CPU from the executor on a busy 2-core machine.
    for (;;) {
      const uint64_t seen = waiter->changes();
      if (query->exec_state() == QueryState::ExecState::kCancelled) break;
      waiter->WaitPast(seen);
    }
    const std::chrono::duration<double> latency = Clock::now() - start;
    state.SetIterationTime(latency.count());
    total_ms += latency.count() * 1e3;
  }
  state.counters["cancel_latency_ms"] =
      benchmark::Counter(total_ms, benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_CancelLatency)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace qr

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  qr::Environment env;
  qr::g_env = &env;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
