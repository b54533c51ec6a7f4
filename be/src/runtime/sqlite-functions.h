#pragma once

#include <sqlite3.h>

#include "util/status.h"

/// Linear-time replacements for SQLite built-in SQL functions whose built-in implementation
/// is superlinear in its input, plus the SQLite limits that bound the ones that cannot be
/// replaced. A single SQL function call cannot be interrupted (sqlite3_interrupt() and the
/// progress handler only act between VM opcodes), so a quadratic built-in on a 16 MiB value
/// pins an executor thread for minutes and ignores cancellation and time limits.
/// Thread-safety: both functions configure one connection; call them before the connection
/// is shared, as for any sqlite3_create_function_v2()/sqlite3_limit() call.
/// See the comment at the top of sqlite-functions.cc for the measurements.

namespace qr {

/// LIKE/GLOB pattern length (bytes) set by ApplyCpuBoundingLimits(): the built-ins' '%'-led
/// LIKE or '*'-led GLOB costs O(value length * pattern length) inside one call; the
/// replacements (sqlite-like.h) need at most 127 pattern items.
constexpr int kLikePatternLengthLimit = 64;

/// Overrides instr(X,Y), replace(X,Y,Z), the two-argument trim/ltrim/rtrim(X,Y), like(P,X),
/// like(P,X,E) and glob(P,X) (sqlite-like.h), and zeroblob(N) (not constant-folded, so that
/// its result is not expanded before the engine checks the row's size) on 'db' with
/// implementations that return exactly what SQLite 3.40's built-ins return (value and
/// type) but run in time linear in the sizes of their arguments (trim: expected linear, it
/// hashes Y's characters); the one-argument trim, ltrim and rtrim use the two-argument
/// implementation with ' '. Also length(X), substr(X,Y[,Z]) and substring(), with checks in
/// their walks (sqlite-text-walk.h). All other functions stay built-in.
Status RegisterLinearTimeFunctions(sqlite3* db);

/// Sets the SQLite limits that bound the built-ins that stay superlinear: currently
/// SQLITE_LIMIT_LIKE_PATTERN_LENGTH = kLikePatternLengthLimit. A longer LIKE/GLOB pattern
/// fails with "LIKE or GLOB pattern too complex".
void ApplyCpuBoundingLimits(sqlite3* db);

}  // namespace qr
