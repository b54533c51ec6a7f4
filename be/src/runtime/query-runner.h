#pragma once

#include "runtime/query-state.h"
#include "runtime/sqlite-engine.h"

namespace qr {

class DeadlineWatchdog;
class LongQueryGate;
class SqliteConnection;

/// Executes one query on 'conn', from prepare to ResultBuffer::Finish(): publishes its
/// columns, steps it, checks each row against the memory budgets before encoding it into
/// pages, hands the pages to the query's ResultBuffer (spooling per 'options'), honours
/// cancellation and the time limit through SQLite's progress handler and sqlite3_interrupt(),
/// and sets the final exec_state. Called by an executor thread of SqliteEngine; returns when
/// the query has ended.
/// With 'deadlines', the statement is also interrupted at the query's time limit wherever it
/// is (DeadlineWatchdog), not only at the runner's next check. With 'gate', a query that has
/// run for LongQueryDemoter::Options::after_ms waits there for its user's turn (LongQueryGate).
/// Thread-safety: one call per connection at a time; 'query' may be cancelled concurrently.
void RunQuery(SqliteConnection* conn, QueryState* query, const SqliteEngine::Options& options,
              DeadlineWatchdog* deadlines = nullptr, LongQueryGate* gate = nullptr);

/// Times executors of queries yielded the CPU (LongQueryDemoter::Options::yield_us), in this
/// process.
int64_t LongQueryYields();

}  // namespace qr
