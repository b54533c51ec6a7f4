#pragma once

#include <string>

#include "util/status.h"

namespace qr {

// The embedded sample database: a deterministic TPC-H-style data set (tables region, nation,
// customer, orders, lineitem with TPC-H column names and types).
// At scale factor 1 the row counts are 5 / 25 / 150000 / 1500000 / ~6000000; region and nation
// are fixed, the rest scale (SF 0.01: 5 / 25 / 1500 / 15000 / ~60000).

/// Removes what interrupted generations left in 'dir' (their temporary files and journals,
/// never a generation still running in another process: each holds a lock on its file);
/// returns how many files it removed. EnsureSampleDatabase() calls it.
int RemoveStaleGenerations(const std::string& dir);

/// Ensures '<data_dir>/tpch-sf<scale>.db' exists and is valid (schema present, row counts and
/// a marker table matching 'scale_factor'); creates it if not. Creation writes to a temporary
/// file in 'data_dir' and renames it into place, so a crash never leaves a half-written database
/// under the final name. Creates 'data_dir' if needed. On success 'path' is the database file.
Status EnsureSampleDatabase(const std::string& data_dir, double scale_factor, std::string* path);

}  // namespace qr
