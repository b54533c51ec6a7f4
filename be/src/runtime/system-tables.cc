#include "runtime/system-tables.h"

#include <time.h>

#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace qr {
namespace {

/// A NULL, an integer or a text value (held, or shared with its owner: a statement).
struct Cell {
  enum class Kind { kNull, kInt, kText, kSharedText };
  Cell() = default;
  Cell(int64_t v) : kind(Kind::kInt), i(v) {}  // NOLINT: implicit, like a literal
  Kind kind = Kind::kNull;
  int64_t i = 0;
  std::string text;
  std::shared_ptr<const std::string> shared;
};
using Rows = std::vector<std::vector<Cell>>;

Cell Text(std::string s) {
  Cell c;
  c.kind = Cell::Kind::kText;
  c.text = std::move(s);
  return c;
}
Cell TextOrNull(std::string s) { return s.empty() ? Cell() : Text(std::move(s)); }
Cell TimeOrNull(int64_t ms) { return ms < 0 ? Cell() : Text(FormatTimestampMillis(ms)); }
Cell SharedText(const std::shared_ptr<const std::string>& s) {
  if (s == nullptr) return Text(std::string());
  Cell c;
  c.kind = Cell::Kind::kSharedText;
  c.shared = s;
  return c;
}

/// One system table: its declaration and how a scan fills its rows. A table is read in
/// batches: 'fill' adds the rows from '*position' on (0 at the start of a scan) and returns
/// false when that was the last batch.
struct TableDef {
  const char* name;
  const char* schema;
  bool (*fill)(SystemTables& tables, uint64_t* position, Rows* rows);
};

/// Rows of a completed_queries scan read per batch: one read of the history per batch.
constexpr size_t kCompletedBatchRows = 256;

void AddQueryRow(const RuntimeQueryRow& q, Rows* rows) {
  std::vector<Cell> r;
  r.reserve(20);
  r.push_back(Text(q.query_id));
  r.push_back(Text(q.state));
  r.push_back(Text(q.user));
  r.push_back(TextOrNull(q.source));
  r.push_back(SharedText(q.query));
  r.push_back(q.queued_time_ms);
  // No separate analysis or planning phase: SQLite prepares within the execution.
  r.push_back(int64_t{0});
  r.push_back(int64_t{0});
  r.push_back(TimeOrNull(q.created_ms));
  r.push_back(TimeOrNull(q.started_ms));
  r.push_back(TimeOrNull(q.last_heartbeat_ms));
  r.push_back(TimeOrNull(q.end_ms));
  r.push_back(TextOrNull(q.error_type));
  r.push_back(TextOrNull(q.error_code));
  r.push_back(TextOrNull(q.error_message));
  r.push_back(q.rows);
  r.push_back(q.bytes);
  r.push_back(q.cpu_time_ms);
  r.push_back(q.vm_steps);
  r.push_back(TextOrNull(q.client_info));
  r.push_back(Text(q.client_tags));
  rows->push_back(std::move(r));
}

bool FillQueries(SystemTables& tables, uint64_t*, Rows* rows) {
  // Between statements nobody is the viewer: nothing is visible.
  if (tables.viewer() == nullptr || tables.source() == nullptr) return false;
  for (const RuntimeQueryRow& q : tables.QueriesSnapshot()) AddQueryRow(q, rows);
  return false;  // one snapshot
}

bool FillCompletedQueries(SystemTables& tables, uint64_t* position, Rows* rows) {
  if (tables.viewer() == nullptr || tables.source() == nullptr) return false;
  std::vector<RuntimeQueryRow> batch;
  // A batch may be empty (none visible to the viewer) and still not the last.
  while (batch.empty()) {
    if (!tables.source()->CompletedQueries(*tables.viewer(), kCompletedBatchRows, position,
                                           &batch)) {
      break;
    }
  }
  for (RuntimeQueryRow& q : batch) AddQueryRow(q, rows);
  return !batch.empty();
}

bool FillNodes(SystemTables& tables, uint64_t*, Rows* rows) {
  if (tables.source() == nullptr) return false;
  for (RuntimeNodeRow& n : tables.source()->Nodes()) {
    rows->push_back({Text(std::move(n.node_id)), Text(std::move(n.http_uri)),
                     Text(std::move(n.node_version)), int64_t{n.coordinator ? 1 : 0},
                     Text(std::move(n.state))});
  }
  return false;
}

// Column names and types are Trino's (system.runtime.queries: query_id ... error_code), then
// ours. The declared types are what the result's column types are derived from.
#define QR_QUERIES_COLUMNS                                                                     \
  "CREATE TABLE x(query_id VARCHAR, state VARCHAR, user VARCHAR, source VARCHAR, "            \
  "query VARCHAR, queued_time_ms BIGINT, analysis_time_ms BIGINT, planning_time_ms BIGINT, "  \
  "created TIMESTAMP(3), started TIMESTAMP(3), last_heartbeat TIMESTAMP(3), "                 \
  "\"end\" TIMESTAMP(3), error_type VARCHAR, error_code VARCHAR, error_message VARCHAR, "     \
  "rows BIGINT, bytes BIGINT, cpu_time_ms BIGINT, vm_steps BIGINT, client_info VARCHAR, "     \
  "client_tags VARCHAR)"
const TableDef kTables[] = {
    {kRuntimeQueriesTable, QR_QUERIES_COLUMNS, FillQueries},
    // The same columns over the whole retained query history, read in batches.
    {kRuntimeCompletedQueriesTable, QR_QUERIES_COLUMNS, FillCompletedQueries},
    {kRuntimeNodesTable,
     "CREATE TABLE x(node_id VARCHAR, http_uri VARCHAR, node_version VARCHAR, "
     "coordinator BOOLEAN, state VARCHAR)",
     FillNodes},
};

struct Module {
  sqlite3_module module{};
  const TableDef* def;
  SystemTables* tables;
};

struct VTab {
  sqlite3_vtab base{};
  Module* module;
};

struct Cursor {
  sqlite3_vtab_cursor base{};
  Rows rows;
  /// The row in 'rows'; 'base_rowid' + pos is its rowid.
  size_t pos = 0;
  int64_t base_rowid = 0;
  /// Where the table's next batch starts, and whether there is one.
  uint64_t position = 0;
  bool more = false;
};

int Connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  auto* m = static_cast<Module*>(aux);
  int rc = sqlite3_declare_vtab(db, m->def->schema);
  if (rc != SQLITE_OK) return rc;
  // Reading it has no side effect: usable from the metadata views with an untrusted schema
  // (SQLITE_DBCONFIG_TRUSTED_SCHEMA off).
  sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
  auto* t = new VTab();
  t->module = m;
  *out = &t->base;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  delete reinterpret_cast<VTab*>(vtab);
  return SQLITE_OK;
}

int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  // A full scan of a snapshot: SQLite applies every constraint itself.
  info->estimatedCost = 1000;
  info->estimatedRows = 1000;
  return SQLITE_OK;
}

int Open(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
  *out = &(new Cursor())->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cur) {
  delete reinterpret_cast<Cursor*>(cur);
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cur, int, const char*, int, sqlite3_value**) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  Module* m = reinterpret_cast<VTab*>(cur->pVtab)->module;
  c->rows.clear();
  c->pos = 0;
  c->base_rowid = 0;
  c->position = 0;
  try {
    c->more = m->def->fill(*m->tables, &c->position, &c->rows);
  } catch (const std::bad_alloc&) {
    return SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  ++c->pos;
  if (c->pos < c->rows.size() || !c->more) return SQLITE_OK;
  // The next batch: only one is held at a time.
  Module* m = reinterpret_cast<VTab*>(cur->pVtab)->module;
  c->base_rowid += static_cast<int64_t>(c->rows.size());
  c->rows.clear();
  c->pos = 0;
  try {
    c->more = m->def->fill(*m->tables, &c->position, &c->rows);
  } catch (const std::bad_alloc&) {
    return SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  return c->pos >= c->rows.size();
}

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int i) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  const Cell& cell = c->rows[c->pos][static_cast<size_t>(i)];
  switch (cell.kind) {
    case Cell::Kind::kInt: sqlite3_result_int64(ctx, cell.i); break;
    case Cell::Kind::kText:
      // The row outlives this call (the cursor holds it until the next Filter or Close).
      sqlite3_result_text(ctx, cell.text.data(), static_cast<int>(cell.text.size()),
                          SQLITE_STATIC);
      break;
    case Cell::Kind::kSharedText:
      // The row holds a reference until the next Filter or Close, as for kText.
      sqlite3_result_text64(ctx, cell.shared->data(), cell.shared->size(), SQLITE_STATIC,
                            SQLITE_UTF8);
      break;
    case Cell::Kind::kNull: sqlite3_result_null(ctx); break;
  }
  return SQLITE_OK;
}

int RowId(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  *out = static_cast<sqlite3_int64>(c->base_rowid + static_cast<int64_t>(c->pos));
  return SQLITE_OK;
}

void DestroyModule(void* aux) { delete static_cast<Module*>(aux); }

}  // namespace

Status SystemTables::Register(sqlite3* db, SystemTablesSource* source,
                              std::unique_ptr<SystemTables>* out) {
  std::unique_ptr<SystemTables> tables(new SystemTables(source));
  for (const TableDef& def : kTables) {
    auto* m = new Module();
    m->def = &def;
    m->tables = tables.get();
    // xCreate null: an eponymous-only table, usable by its name and never created in (or
    // listed by) the database file's schema.
    m->module.iVersion = 1;
    m->module.xCreate = nullptr;
    m->module.xConnect = Connect;
    m->module.xBestIndex = BestIndex;
    m->module.xDisconnect = Disconnect;
    m->module.xDestroy = Disconnect;
    m->module.xOpen = Open;
    m->module.xClose = Close;
    m->module.xFilter = Filter;
    m->module.xNext = Next;
    m->module.xEof = Eof;
    m->module.xColumn = Column;
    m->module.xRowid = RowId;
    // On failure SQLite calls DestroyModule itself.
    int rc = sqlite3_create_module_v2(db, def.name, &m->module, m, DestroyModule);
    if (rc != SQLITE_OK) {
      return Internal(std::string("registering the system table ") + def.name + ": " +
                      sqlite3_errstr(rc));
    }
  }
  *out = std::move(tables);
  return Status::OK();
}

SystemTables::~SystemTables() = default;

const std::vector<RuntimeQueryRow>& SystemTables::QueriesSnapshot() {
  if (!queries_) queries_ = source_->Queries(*viewer_);
  return *queries_;
}

std::string FormatTimestampMillis(int64_t epoch_ms, TimestampStyle style) {
  int64_t secs = epoch_ms >= 0 ? epoch_ms / 1000 : (epoch_ms - 999) / 1000;
  time_t tt = static_cast<time_t>(secs);
  struct tm tm {};
  gmtime_r(&tt, &tm);
  const bool iso = style == TimestampStyle::kIso;
  char buf[64];
  snprintf(buf, sizeof(buf), "%04d-%02d-%02d%c%02d:%02d:%02d.%03d%s", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, iso ? 'T' : ' ', tm.tm_hour, tm.tm_min, tm.tm_sec,
           static_cast<int>(epoch_ms - secs * 1000), iso ? "Z" : "");
  return buf;
}

}  // namespace qr
