// SQLite's heap, accounted without SQLite's global memory mutex.
//
// A hard limit on SQLite's heap (sqlite3_hard_heap_limit64) needs SQLite's memory statistics,
// and with them every sqlite3_malloc, realloc and free of every connection takes one
// process-wide mutex, held across the allocator call itself: a query that grows an 8 MB string
// (printf('%.*c', ...), replace(), group_concat) holds it through each realloc and copy, and
// every other query's allocations wait behind it. This allocator keeps the count and enforces
// the limit with atomics instead, and turns SQLite's statistics off.
#pragma once

#include <cstdint>

#include "util/status.h"

namespace qr {

/// Installs the accounting allocator (SQLITE_CONFIG_MALLOC, SQLITE_CONFIG_MEMSTATUS off).
/// Must run before SQLite initializes (before any connection is opened); idempotent. Returns
/// an error, and leaves SQLite's own allocator and statistics in place, when SQLite is already
/// initialized: the functions below then use SQLite's (the limit still holds, behind the
/// mutex).
Status InstallSqliteHeap();

/// True once InstallSqliteHeap() succeeded in this process.
bool SqliteHeapInstalled();

/// The most SQLite's heap may hold, process-wide (0: unlimited). An allocation beyond it
/// fails, and SQLite answers SQLITE_NOMEM to the statement that made it.
void SetSqliteHeapLimit(int64_t bytes);
int64_t SqliteHeapLimit();

/// Bytes SQLite holds now, and the most it held since the last reset.
int64_t SqliteHeapUsed();
int64_t SqliteHeapPeak();
void ResetSqliteHeapPeak();

/// Allocations refused by the limit so far (0 without the accounting allocator).
int64_t SqliteHeapRefusals();

}  // namespace qr
