// Resource budgets seen from outside: result memory, SQLite's heap, spill quotas and the
// CPU-bounded functions answer with their Trino errors naming their flags; afterwards the
// server still answers SELECT 1 and its budgets and registries drain.

#include <memory>
#include <string>
#include <vector>


#include <gtest/gtest.h>

#include "resource-limits-test-util.h"
#include "runtime/sqlite-heap.h"

namespace qr::testing {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Memory

TEST_F(ResourceLimitsTest, WideRowFailsItsQueryNotTheServer) {
  // The default --query_max_memory_mb (128 MiB) and 60 values of 2 MB each (the default
  // --max_value_mb allows one): one row of 120 MB, which fits, but 160 MB once
  // base64-encoded, which does not; the columns' types are decided by their values.
  Start(Options());
  std::string sql = "SELECT ";
  for (int i = 0; i < 60; ++i) {
    if (i > 0) sql += ", ";
    sql += "zeroblob(2000000) c" + std::to_string(i);
  }
  ResetSqliteHeapPeak();
  const int64_t heap_before = SqliteHeapUsed();
  StatementResult r = RunStatement(port_, sql);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FAILED");
  // The row's size is known before SQLite expands a single blob: the query's own budget
  // refuses it, not SQLite's shared heap after ~1 GB of allocations.
  EXPECT_EQ(r.error_name(), "EXCEEDED_LOCAL_MEMORY_LIMIT") << r.error.dump();
  EXPECT_EQ(r.error.value("errorType", ""), "INSUFFICIENT_RESOURCES") << r.error.dump();
  const std::string message = MessageOf(r);
  EXPECT_NE(message.find("--query_max_memory_mb"), std::string::npos) << message;
  EXPECT_LT(SqliteHeapPeak() - heap_before, int64_t{16} << 20)
      << "SQLite's heap grew by a blob or more";
  EXPECT_TRUE(WaitFor([&] { return server_->result_memory()->used_bytes() == 0; }, kDeadline))
      << server_->result_memory()->used_bytes() << " bytes still reserved";
  ExpectServes();
  ExpectDrained();
  EXPECT_TRUE(WaitFor([&] { return server_->result_memory()->used_bytes() == 0; }, kDeadline))
      << server_->result_memory()->used_bytes() << " bytes still reserved after SELECT 1";
}

TEST_F(ResourceLimitsTest, ValuesPastTheValueLimitFailTheirQueryNamingTheFlag) {
  Start(Options());
  EXPECT_EQ(Metric("qr_limit{flag=\"max_value_mb\"}"), 2);
  const double before = Metric("qr_value_limit_refusals_total");
  // A JSON text of 2 MiB + 1: SQLite's json_* parse one in ~50 ms; 16 MiB took 0.3-0.45 s in
  // one call nothing interrupts.
  StatementResult r = RunStatement(
      port_, "SELECT json_valid('[' || printf('%.*c', 2097151, '1') || ']')");
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  ExpectFailed(r, "GENERIC_INSUFFICIENT_RESOURCES", "INSUFFICIENT_RESOURCES", "--max_value_mb");
  EXPECT_NE(MessageOf(r).find("at most 2.0 MiB"), std::string::npos) << MessageOf(r);
  EXPECT_EQ(Metric("qr_value_limit_refusals_total"), before + 1);
  StatementResult fits =
      RunStatement(port_, "SELECT json_valid('[' || printf('%.*c', 2097150, '1') || ']')");
  EXPECT_EQ(fits.final_state, "FINISHED") << fits.error.dump();
  ASSERT_EQ(fits.rows.size(), 1u);
  EXPECT_EQ(fits.rows[0][0], 1);
  ExpectDrained();
  ExpectServes();
}

TEST_F(ResourceLimitsTest, UnfetchedResultsHitTheGlobalResultBudget) {
  CoordinatorServer::Options o = Options();
  o.max_result_memory_bytes = int64_t{2} << 20;
  Start(o);
  // One ~1.2 MiB page each (900 KB of blob, base64-encoded): a page of its own is held in
  // memory even though it is larger than the result buffer (never spooled), so every
  // unfetched one holds its bytes of the budget until its client fetches or cancels it.
  const std::string sql = "SELECT zeroblob(900000) AS b";
  std::vector<std::unique_ptr<StatementClient>> held;
  std::vector<ClientRequestStatePtr> reqs;
  for (int i = 0; i < 3; ++i) {
    held.push_back(SubmitUnfetched(port_, sql));
    reqs.push_back(RequestOf(held.back()->result().id));
    ASSERT_NE(reqs.back(), nullptr);
    // One at a time, so that it is always a later one that finds the budget taken.
    ASSERT_TRUE(WaitFor([&] { return reqs.back()->execution_done(); }, kDeadline));
  }
  const MemoryBudget* budget = server_->result_memory();
  EXPECT_LE(budget->peak_bytes(), int64_t{2} << 20);
  EXPECT_GT(budget->refusals(), 0);
  EXPECT_GT(budget->used_bytes(), int64_t{1} << 20) << "the first query's page";
  EXPECT_FALSE(ClientRequestState::IsTerminal(reqs[0]->state()))
      << reqs[0]->GetInfo().error.value_or(QueryError{}).message;
  // The later ones failed in their executors; their clients learn why from the protocol.
  for (size_t i = 1; i < reqs.size(); ++i) {
    StatementClient& c = *held[i];
    while (!c.done() && c.result().failure.empty()) c.Advance();
    ExpectFailed(c.result(), "EXCEEDED_GLOBAL_MEMORY_LIMIT", "INSUFFICIENT_RESOURCES",
                 "--max_result_memory_mb");
    EXPECT_EQ(c.result().error.value("errorCode", -1), 131073);
  }
  EXPECT_EQ(held[0]->Cancel().status, 204);
  EXPECT_TRUE(WaitFor([&] { return budget->used_bytes() == 0; }, kDeadline))
      << budget->used_bytes() << " bytes still reserved";
  ExpectDrained();
  ExpectServes();
  // With the budget free again, the same query runs and delivers its row.
  StatementResult again = RunStatement(port_, sql);
  EXPECT_EQ(again.final_state, "FINISHED") << again.error.dump();
  EXPECT_EQ(again.rows.size(), 1u);
  ExpectDrained();
  EXPECT_TRUE(WaitFor([&] { return budget->used_bytes() == 0; }, kDeadline))
      << budget->used_bytes() << " bytes still reserved after the queries were fetched";
}

// ---------------------------------------------------------------------------------------------
// Spill

constexpr char kSpillingSort[] = "SELECT * FROM lineitem ORDER BY l_comment";

TEST_F(ResourceLimitsTest, SortThatSpillsPastTheQueryLimitFailsWithExceededSpillLimit) {
  // First, with the default limits: the sort spills (or this test proves nothing). Its
  // first page comes only once the whole sort is done.
  Start(Options());
  {
    StatementClient c(port_);
    c.Submit(kSpillingSort);
    c.AdvanceToData();
    ASSERT_FALSE(c.done()) << c.result().error.dump();
    EXPECT_GT(server_->spill_budget()->peak_bytes(), 0) << "the sort did not spill";
    EXPECT_EQ(c.Cancel().status, 204);
    ExpectDrained();
    EXPECT_TRUE(WaitFor([&] { return server_->spill_budget()->used_bytes() == 0; }, kDeadline));
  }
  server_->Shutdown(0);
  server_.reset();

  CoordinatorServer::Options o = Options();
  o.query_max_spill_bytes = int64_t{1} << 20;
  Start(o);
  StatementResult r = RunStatement(port_, kSpillingSort);
  ExpectFailed(r, "EXCEEDED_SPILL_LIMIT", "INSUFFICIENT_RESOURCES", "--query_max_spill_mb");
  EXPECT_EQ(r.error.value("errorCode", -1), 131078);
  EXPECT_GT(server_->spill_budget()->query_refusals(), 0);
  EXPECT_EQ(Metric("qr_spill_refusals_total{limit=\"query_max_spill_mb\"}"),
            server_->spill_budget()->query_refusals());
  EXPECT_TRUE(WaitFor([&] { return server_->spill_budget()->used_bytes() == 0; }, kDeadline))
      << server_->spill_budget()->used_bytes() << " spill bytes still charged";
  ExpectDrained();
  ExpectServes();
}

// ---------------------------------------------------------------------------------------------
// CPU

TEST_F(ResourceLimitsTest, InstrOnLongStringsIsLinearAndARecursiveQueryStillCancels) {
  Start(Options());
  // Quadratic in the built-in instr (minutes); the test's own timeout catches a regression.
  StatementResult r = RunStatement(
      port_,
      "SELECT instr(x || 'b', substr(x, 1, 1000000) || 'b') "
      "FROM (SELECT printf('%.*c', 2000000, 'a') AS x)");
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FINISHED") << r.error.dump();
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0], 1000001);

  StatementOptions so;
  so.max_wait = "10ms";
  StatementClient c(port_, so);
  c.Submit(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
      "SELECT count(*) FROM c WHERE instr(printf('%.*c', 100000, 'a') || x, 'a' || x) > 0");
  auto req = RequestOf(c.result().id);
  ASSERT_NE(req, nullptr);
  ASSERT_TRUE(WaitFor([&] { return req->exec_elapsed_ms() >= 0; }, kDeadline));
  EXPECT_EQ(c.Cancel().status, 204);
  EXPECT_TRUE(WaitFor([&] { return req->execution_done(); }, kDeadline));
  ClientRequestState::Info info = req->GetInfo();
  ASSERT_TRUE(info.error.has_value());
  EXPECT_EQ(info.error->name, "USER_CANCELED");
  ExpectDrained();
  ExpectServes();
}

/// 1500 upper() calls on 2 MB values in one row: seconds of SQLite's own built-ins with no
/// jump between them, where stock SQLite would check its interrupt (3-8 ms each on a 2-vCPU
/// VM). The project's SQLite checks before every opcode (the cancel's and the deadline
/// watchdog's sqlite3_interrupt), and each call's allocation runs the query's checkpoint
/// (StepCheckpoint::Allocating): either stops the row. Nothing runs before the row but the
/// statement's prepare, and nothing in the prepare allocates megabytes.
constexpr int kUpperCalls = 1500;
/// Each call is six opcodes (OP_Once, the constant 2000000, three calls, a copy).
constexpr int64_t kRowOpcodes = 6 * kUpperCalls;
std::string RowOfUpperCalls() {
  std::string sql = "SELECT ";
  for (int i = 0; i < kUpperCalls; ++i) {
    if (i > 0) sql += ", ";
    sql += "length(upper(zeroblob(2000000))) c" + std::to_string(i);
  }
  return sql;
}

TEST_F(ResourceLimitsTest, ARowOfManyBuiltinCallsStopsAtItsTimeLimitInsideTheRow) {
  Start(Options());
  StatementOptions so;
  // Far longer than the prepare, far shorter than the row.
  so.post_headers = {{"X-Trino-Session", "query_max_execution_time=1s"}};
  StatementResult r = RunStatement(port_, RowOfUpperCalls(), so);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.final_state, "FAILED");
  // The time limit, not the interrupt or SQLITE_NOMEM through which the row was stopped.
  EXPECT_EQ(r.error_name(), "EXCEEDED_TIME_LIMIT") << r.error.dump();
  auto req = RequestOf(r.id);
  ASSERT_NE(req, nullptr);
  EXPECT_LT(req->GetInfo().vm_steps, kRowOpcodes) << "the row ran to its end";
  ExpectDrained();
  ExpectServes();
}

TEST_F(ResourceLimitsTest, ARowOfManyBuiltinCallsStopsAtACancelInsideTheRow) {
  Start(Options());
  ASSERT_TRUE(SqliteHeapInstalled()) << "the server installs the accounting allocator first";
  const int64_t heap_before = SqliteHeapUsed();
  ResetSqliteHeapPeak();
  StatementOptions so;
  so.max_wait = "10ms";
  StatementClient c(port_, so);
  c.Submit(RowOfUpperCalls());
  auto req = RequestOf(c.result().id);
  ASSERT_NE(req, nullptr);
  // Inside the row: its calls hold 4 MB and more at a time, the prepare far less.
  ASSERT_TRUE(WaitFor([&] { return SqliteHeapPeak() - heap_before >= (int64_t{4} << 20); },
                      kDeadline));
  EXPECT_EQ(c.Cancel().status, 204);
  EXPECT_TRUE(WaitFor([&] { return req->execution_done(); }, kDeadline));
  ClientRequestState::Info info = req->GetInfo();
  ASSERT_TRUE(info.error.has_value());
  EXPECT_EQ(info.error->name, "USER_CANCELED") << info.error->message;
  EXPECT_LT(info.vm_steps, kRowOpcodes) << "the row ran to its end";
  ExpectDrained();
  ExpectServes();
}

}  // namespace
}  // namespace qr::testing
