#pragma once

// Internal to sample-db.cc and sample-db-generator.cc: the generator of the sample database
// and what the validation shares with it.

#include <sqlite3.h>

#include <array>
#include <memory>
#include <string>

#include "util/status.h"

namespace qr::sample_db {

/// Bump when the generated data or schema changes: older files are then regenerated.
inline constexpr const char* kGeneratorVersion = "qr-tpch-1";

/// The generated tables; the metadata table records each one's row count as "rows_<table>".
inline constexpr std::array<const char*, 5> kTables = {"region", "nation", "customer", "orders",
                                                       "lineitem"};

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

/// The scale factor as in file names and the metadata: the shortest text that reads back as
/// 'scale' ("0.01", "1").
std::string ScaleString(double scale);

/// An Internal error naming what was being done to 'path' and SQLite's message ('db' may be
/// null: SQLite could not allocate it).
Status SqliteError(sqlite3* db, const std::string& path, const char* what);

/// Generates the database of 'scale' into a fresh temporary file in 'dir' (locked while it is
/// written, see RemoveStaleGenerations()), fsyncs it, renames it to 'path' and fsyncs 'dir'.
/// On failure the temporary file is removed and 'path' is untouched.
Status Generate(const std::string& dir, const std::string& path, double scale);

}  // namespace qr::sample_db
