#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>

#include "util/status.h"

/// Trino's metadata tables over the served database (docs/protocol.md, "Metadata"): the
/// served catalog (named by --catalog_name) has the schemas main and information_schema; the
/// catalog "system" has the schemas jdbc and metadata.
///
/// Each table is a view in the connection's temp schema named by its dotted Trino name
/// ("information_schema.tables", "system.jdbc.columns", "system.metadata.catalogs"), which
/// RewriteCatalogNames() (sql-rewrite.h) makes the names Trino's clients send resolve to.
/// The listings are computed from temp.sqlite_schema: a new system table is one more view
/// named "system.<schema>.<table>" (InstallMetadataViews' kViews), and shows in
/// system.jdbc.tables, SHOW TABLES FROM system.<schema> and SHOW SCHEMAS FROM system with no
/// other change.
/// Thread-safety: per connection; called while the connection is being configured.

namespace qr {

/// The default --catalog_name.
inline constexpr char kDefaultCatalogName[] = "sqlite";

/// OK if 'name' can name the served catalog: a lower-case identifier ([a-z_][a-z0-9_]*, at
/// most 64 bytes) other than "system" (Trino's catalog of system tables).
Status ValidateCatalogName(std::string_view name);

/// Creates the metadata views for catalog 'catalog' in the temp schema of 'db' and registers
/// the SQL functions they use (qr_type_info(declared_type, field), qr_view_body(sql)), and
/// the one-row table temp.qr_valid (column Valid BOOLEAN) that EXPLAIN (TYPE VALIDATE) answers
/// with. Must run before the connection is made read-only (PRAGMA query_only) and before its
/// authorizer is installed.
Status InstallMetadataViews(sqlite3* db, std::string_view catalog);

}  // namespace qr
