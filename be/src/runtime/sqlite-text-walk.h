#pragma once

#include <sqlite3.h>

#include "util/status.h"

/// length(X), substr(X,Y[,Z]) and substring() with checks inside their walks over a text.
///
/// SQLite's own walk a text character by character (~1.5 ns per byte: ~3 ms for 2 MiB) and
/// allocate nothing, so neither an interrupt (SQLite checks one only between rows) nor the
/// allocation checkpoint (StepCheckpoint::Allocating) ran inside a row of many such calls:
/// a row of 100 length() calls on a 2 MB value held its executor ~0.25 s after a cancel.
/// These answer exactly what SQLite 3.40's built-ins answer (tested against them on edge
/// cases and random UTF-8, malformed sequences included), count eight ASCII bytes at a time,
/// and charge every 64 KiB they walk to StepCheckpoint::Charge() (SQLITE_INTERRUPT when the
/// statement must stop). Cost: the built-in length() of a BLOB column reads only the value's
/// size (SQLite's OPFLAG_LENGTHARG); an application-defined length() reads the value.
/// Thread-safety: registration configures one connection; call it before the connection is
/// shared.

namespace qr {

/// Overrides length/1, substr/2, substr/3, substring/2 and substring/3 on 'db'.
Status RegisterCheckedTextWalks(sqlite3* db);

}  // namespace qr
