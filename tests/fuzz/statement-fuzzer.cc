// Random bytes as SQL through the execution engine: each input is one query, registered in a
// QueryExecMgr and executed by a SqliteEngine over a tiny sample database, with a 200 ms
// execution time limit and a small result buffer; the fuzzer drains its ResultBuffer like the
// coordinator does.
//
// Properties:
//  - the query ends (no hang) in a terminal state that matches its outcome: FINISHED without
//    error, or FAILED with a QueryError whose code, name and type are one of Trino's, with a
//    message; CANCELLED only when the fuzzer cancelled it (after reading too many rows);
//  - a reported error location (line, column) lies inside the statement's text;
//  - a finished query published its columns before any row, each with a known Trino type, and
//    every page is JSON: rows of exactly one value per column, each value valid for its type;
//  - the database stays read-only: its file is unchanged, and no connection ever holds a
//    temporary table, view or trigger;
//  - once interrupted, a statement returns promptly: each input is also run on its own
//    SqliteConnection (the daemon's lock-down, but values capped at kProbeLengthLimit), and a
//    watchdog thread interrupts it 20 ms after its first step (sqlite3_interrupt); it must end
//    within 5 s of the interrupt (QR_FUZZ_INTERRUPT_AFTER_MS, QR_FUZZ_INTERRUPT_BOUND_MS). One
//    SQLite function call cannot be interrupted, so this is what finds a built-in that is
//    superlinear in its input (sqlite-functions.h). QR_FUZZ_CANCEL=progress cancels as
//    SqliteEngine does instead: a flag its progress handler polls every 1000 VM steps.

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "fuzz-util.h"
#include "interrupt-watchdog.h"
#include "runtime/query-exec-mgr.h"
#include "runtime/sample-db.h"
#include "runtime/sqlite-connection.h"
#include "runtime/sqlite-engine.h"
#include "util/mutex.h"

namespace {

using namespace std::chrono_literals;
using qr::QueryError;
using qr::QueryState;
using ExecState = QueryState::ExecState;
using Json = nlohmann::json;
using Clock = qr::fuzz::Clock;
using qr::fuzz::CancelVia;
using qr::fuzz::InterruptWatchdog;
using qr::fuzz::Millis;

constexpr int64_t kTimeLimitMs = 200;
/// A query that is still running this long after its submission hangs.
constexpr auto kDeadline = 20s;
/// Rows read before the fuzzer cancels the query (which also exercises cancellation).
constexpr int64_t kMaxRows = 4096;
/// Pages larger than this are not parsed as JSON (one value may be up to --max_value_mb).
constexpr size_t kMaxParsedPageBytes = 1 << 20;
/// Inputs between two read-only checks.
constexpr int kReadOnlyCheckEvery = 256;
/// SQLITE_LIMIT_LENGTH of the interrupt probe's connection (the daemon's default: 2 MiB). At
/// 1 MiB an adversarial input makes a quadratic built-in take seconds (SQLite's instr: 5-7 s, its
/// trim with a long Y: minutes), past the bound, while the slowest linear or pattern-bounded
/// call takes ~0.2-0.5 s under the sanitizers. At 512 KiB the quadratic instr takes ~1.3 s,
/// below the bound; docs/fuzzing.md has the measurements.
constexpr int kProbeLengthLimit = 1 << 20;
/// Time from the probe statement's first step to its interrupt (QR_FUZZ_INTERRUPT_AFTER_MS):
/// a statement that ends sooner costs nothing more, a longer one is cut short here.
constexpr int64_t kDefaultInterruptAfterMs = 20;
/// How soon an interrupted statement must end (QR_FUZZ_INTERRUPT_BOUND_MS): generous, for
/// the sanitizers and a busy 2-core machine, where our linear replace() of every byte of a
/// 1 MiB value takes ~0.5 s (instrumented, ~30x native) and a seed took 0.75 s with a CI
/// build beside it, yet below what a quadratic built-in takes at kProbeLengthLimit (5-7 s
/// natively for SQLite's own instr, several times that instrumented). A CI run must not fail
/// on a busy machine's latency.
constexpr int64_t kDefaultInterruptBoundMs = 5000;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// $'name' as a positive number of milliseconds, 'fallback' when unset.
std::chrono::milliseconds EnvMillis(const char* name, int64_t fallback) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return std::chrono::milliseconds(fallback);
  char* end = nullptr;
  const long long ms = strtoll(value, &end, 10);
  if (*end != '\0' || ms <= 0) {
    qr::fuzz::Fail(__FILE__, __LINE__,
                   std::string(name) + " takes a positive number of milliseconds", value);
  }
  return std::chrono::milliseconds(ms);
}

struct Fixture {
  std::string db_path;
  std::string db_contents;
  std::unique_ptr<qr::QueryExecMgr> mgr;
  std::unique_ptr<qr::SqliteEngine> engine;
  /// The interrupt probe: a connection of its own, and its watchdog (destroyed first).
  std::unique_ptr<qr::SqliteConnection> probe;
  std::unique_ptr<InterruptWatchdog> watchdog;
  int64_t probes_interrupted = 0;
  Clock::duration slowest_end = {};
  /// The probe's temporary schema objects when it opened: the metadata views
  /// (trino-metadata.h) and nothing else may ever be there.
  int64_t probe_temp_objects = -1;
};
Fixture* g = nullptr;

/// Wakes the draining fuzzer when the result buffer changes.
struct Changes {
  qr::Mutex mu;
  qr::CondVar cv;
  uint64_t count QR_GUARDED_BY(mu) = 0;
};

bool IsKnownError(const QueryError& e) {
  struct Known {
    int32_t code;
    const char* name;
    qr::ErrorType type;
  };
  static constexpr Known kKnown[] = {
      {0, "GENERIC_USER_ERROR", qr::ErrorType::kUserError},
      {1, "SYNTAX_ERROR", qr::ErrorType::kUserError},
      {4, "PERMISSION_DENIED", qr::ErrorType::kUserError},
      {13, "NOT_SUPPORTED", qr::ErrorType::kUserError},
      {44, "CATALOG_NOT_FOUND", qr::ErrorType::kUserError},
      {45, "SCHEMA_NOT_FOUND", qr::ErrorType::kUserError},
      {46, "TABLE_NOT_FOUND", qr::ErrorType::kUserError},
      {47, "COLUMN_NOT_FOUND", qr::ErrorType::kUserError},
      {59, "INVALID_LITERAL", qr::ErrorType::kUserError},
      {80, "INVALID_PARAMETER_USAGE", qr::ErrorType::kUserError},
      {131072, "GENERIC_INSUFFICIENT_RESOURCES", qr::ErrorType::kInsufficientResources},
      {131073, "EXCEEDED_GLOBAL_MEMORY_LIMIT", qr::ErrorType::kInsufficientResources},
      {131075, "EXCEEDED_TIME_LIMIT", qr::ErrorType::kInsufficientResources},
      {131078, "EXCEEDED_SPILL_LIMIT", qr::ErrorType::kInsufficientResources},
      {131079, "EXCEEDED_LOCAL_MEMORY_LIMIT", qr::ErrorType::kInsufficientResources},
  };
  for (const Known& k : kKnown) {
    if (e.code == k.code && e.name == k.name && e.type == k.type) return true;
  }
  return false;
}

/// Code points of 'line' (UTF-8 continuation bytes do not count).
int CodePoints(std::string_view line) {
  int n = 0;
  for (unsigned char c : line) n += (c & 0xC0) != 0x80;
  return n;
}

void CheckErrorLocation(std::string_view sql, const QueryError& e) {
  if (e.line == 0 && e.column == 0) return;
  FUZZ_CHECK(e.line >= 1 && e.column >= 1, "error location not 1-based", e.message);
  std::string_view rest = sql;
  for (int l = 1; l < e.line; ++l) {
    const size_t nl = rest.find('\n');
    FUZZ_CHECK(nl != std::string_view::npos, "error line past the statement's lines", e.message);
    rest.remove_prefix(nl + 1);
  }
  const std::string_view line = rest.substr(0, rest.find('\n'));
  // The column may point just past the line's last character (an incomplete statement).
  FUZZ_CHECK(e.column <= CodePoints(line) + 1, "error column past its line's end", e.message);
}

/// A type's name without its parameters: "varchar(25)" -> "varchar", "decimal(12,2)" ->
/// "decimal", "timestamp(3)" -> "timestamp".
std::string_view BaseType(std::string_view type) { return type.substr(0, type.find('(')); }

void CheckValue(const Json& v, const std::string& full_type, const std::string& page) {
  if (v.is_null()) return;
  const std::string_view type = BaseType(full_type);
  if (type == "bigint") {
    FUZZ_CHECK(v.is_number_integer(), "bigint value not an integer", page);
  } else if (type == "double") {
    FUZZ_CHECK(v.is_number() || v == "NaN" || v == "Infinity" || v == "-Infinity",
               "double value not a number", page);
  } else if (type == "varchar" || type == "varbinary" || type == "date" ||
             type == "timestamp" || type == "decimal") {
    // Dates, timestamps and decimals are strings in Trino's protocol, as text is.
    FUZZ_CHECK(v.is_string(), "varchar/varbinary/date/timestamp/decimal value not a string",
               page);
  } else if (type == "boolean") {
    FUZZ_CHECK(v.is_boolean(), "boolean value not true/false", page);
  } else {
    FUZZ_CHECK(type == "unknown", "unexpected column type", full_type);
    FUZZ_CHECK(false, "non-null value in an unknown column", page);
  }
}

void CheckPage(const qr::ResultPage& page, const std::vector<qr::Column>* columns) {
  FUZZ_CHECK(columns != nullptr, "a page arrived before the columns");
  const std::string& rows = *page.json_rows;
  if (rows.size() > kMaxParsedPageBytes) {
    // Parsing megabytes of JSON with instrumented code takes seconds: check the framing only.
    FUZZ_CHECK(rows.front() == '[' && rows.back() == ']', "a large page is not rows");
    return;
  }
  const Json parsed = Json::parse("[" + rows + "]", nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!parsed.is_discarded(), "a page is not JSON", rows);
  FUZZ_CHECK(static_cast<int64_t>(parsed.size()) == page.num_rows, "page row count", rows);
  for (const Json& row : parsed) {
    FUZZ_CHECK(row.is_array() && row.size() == columns->size(), "row width != columns", rows);
    for (size_t i = 0; i < row.size(); ++i) CheckValue(row[i], (*columns)[i].type, rows);
  }
}

void CheckColumns(const std::vector<qr::Column>& columns) {
  for (const qr::Column& c : columns) {
    FUZZ_CHECK(!c.name.empty(), "empty column name");
    const std::string_view type = BaseType(c.type);
    FUZZ_CHECK(type == "bigint" || type == "double" || type == "varchar" ||
                   type == "varbinary" || type == "boolean" || type == "unknown" ||
                   type == "date" || type == "timestamp" || type == "decimal",
               "unexpected column type", c.type);
    FUZZ_CHECK(Json::accept(c.type_signature_json), "typeSignature is not JSON",
               c.type_signature_json);
  }
}

struct Outcome {
  ExecState state;
  std::optional<QueryError> error;
  bool cancelled_by_us = false;
};

/// Runs 'sql' to its end, checking every page on the way.
Outcome RunQuery(std::string sql) {
  qr::QueryContext ctx;
  ctx.statement = std::make_shared<const std::string>(std::move(sql));
  ctx.user = "fuzz";
  ctx.exec_time_limit_ms = kTimeLimitMs;
  ctx.result_buffer_max_rows = 256;
  ctx.result_buffer_max_bytes = 64 << 10;
  ctx.page_max_rows = 64;
  ctx.page_max_bytes = 16 << 10;
  qr::QueryStateHandle query;
  FUZZ_CHECK(g->mgr->CreateQueryState(qr::GenerateQueryId(), std::move(ctx), &query).ok());
  auto changes = std::make_shared<Changes>();
  qr::ResultBuffer* buf = query->result_buffer();
  buf->SetOnChange([changes] {
    qr::MutexLock l(&changes->mu);
    ++changes->count;
    changes->cv.NotifyAll();
  });
  g->engine->Execute(query.Clone());
  Outcome out;
  int64_t rows = 0;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  for (;;) {
    uint64_t seen;
    {
      qr::MutexLock l(&changes->mu);
      seen = changes->count;
    }
    qr::ResultPage page;
    std::optional<QueryError> error;
    const qr::ResultBuffer::Next next = buf->TryGet(&page, &error);
    if (next == qr::ResultBuffer::Next::kPage) {
      CheckPage(page, buf->columns());
      rows += page.num_rows;
      if (rows > kMaxRows && !out.cancelled_by_us) {
        out.cancelled_by_us = query->Cancel(QueryError::UserCanceled());
      }
      continue;
    }
    if (next == qr::ResultBuffer::Next::kEnd) {
      out.error = std::move(error);
      break;
    }
    qr::MutexLock l(&changes->mu);
    while (changes->count == seen) {
      FUZZ_CHECK(std::chrono::steady_clock::now() < deadline, "the query never ended",
                 *query->query_ctx().statement);
      changes->cv.WaitUntil(&changes->mu, deadline);
    }
  }
  out.state = query->exec_state();
  if (out.state == ExecState::kFinished && buf->columns() != nullptr) CheckColumns(*buf->columns());
  return out;
}

/// Runs 'sql' on the probe connection under the watchdog (which fails the run if it ends
/// late after its interrupt), discarding its rows.
void ProbeInterrupt(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  QueryError error;
  if (!g->probe->Prepare(sql, &stmt, &error)) return;  // RunQuery() checks the error
  g->watchdog->Arm(&sql);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
  }
  const std::optional<Clock::duration> late = g->watchdog->Disarm();
  sqlite3_finalize(stmt);
  if (late) {
    ++g->probes_interrupted;
    g->slowest_end = std::max(g->slowest_end, *late);
  }
}

/// The number of temporary schema objects of the probe connection.
int64_t ProbeTempObjects() {
  sqlite3_stmt* stmt = nullptr;
  QueryError error;
  FUZZ_CHECK(g->probe->Prepare("SELECT count(*) FROM sqlite_temp_master", &stmt, &error),
             "cannot read the probe's sqlite_temp_master", error.message);
  const int64_t n = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  return n;
}

/// The database file is unchanged and no connection has a temporary schema object beyond
/// the metadata views it was opened with.
void CheckReadOnly() {
  FUZZ_CHECK(ReadFile(g->db_path) == g->db_contents, "the database file changed");
  // One executor thread: this runs on the very connection the inputs ran on.
  const Outcome temp = RunQuery("SELECT count(*) FROM sqlite_temp_master");
  FUZZ_CHECK(temp.state == ExecState::kFinished, "cannot read sqlite_temp_master");
  FUZZ_CHECK(ProbeTempObjects() == g->probe_temp_objects,
             "the probe connection's temporary schema objects changed");
}

/// Opens the probe connection, as the daemon opens its connections, and starts its watchdog.
void StartInterruptProbe() {
  qr::Status s = qr::SqliteConnection::Open(g->db_path, &g->probe, "sqlite", kProbeLengthLimit);
  FUZZ_CHECK(s.ok(), "cannot open the probe connection", s.message());
  g->probe_temp_objects = ProbeTempObjects();
  FUZZ_CHECK(g->probe_temp_objects > 0, "the probe connection has no metadata views");
  const char* via = getenv("QR_FUZZ_CANCEL");
  const std::string_view via_name = via != nullptr ? via : "interrupt";
  FUZZ_CHECK(via_name == "interrupt" || via_name == "progress",
             "QR_FUZZ_CANCEL takes interrupt (the default) or progress", via_name);
  g->watchdog = std::make_unique<InterruptWatchdog>(
      g->probe.get(), via_name == "progress" ? CancelVia::kProgressHandler : CancelVia::kInterrupt,
      EnvMillis("QR_FUZZ_INTERRUPT_AFTER_MS", kDefaultInterruptAfterMs),
      EnvMillis("QR_FUZZ_INTERRUPT_BOUND_MS", kDefaultInterruptBoundMs));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  if (getenv("QR_FUZZ_VERBOSE") == nullptr) FLAGS_minloglevel = google::GLOG_ERROR;
  g = new Fixture;
  qr::Status s = qr::EnsureSampleDatabase(qr::fuzz::DataDir(), qr::fuzz::kSampleScale, &g->db_path);
  FUZZ_CHECK(s.ok(), "cannot create the sample database", s.message());
  g->db_contents = ReadFile(g->db_path);
  FUZZ_CHECK(!g->db_contents.empty(), "cannot read the sample database", g->db_path);
  g->mgr = std::make_unique<qr::QueryExecMgr>();
  qr::SqliteEngine::Options options;
  options.database_path = g->db_path;
  options.num_threads = 1;
  s = qr::SqliteEngine::Create(options, &g->engine);
  FUZZ_CHECK(s.ok(), "cannot start the engine", s.message());
  StartInterruptProbe();
  atexit([] {
    fprintf(stderr,
            "statement-fuzzer: %lld statements interrupted; the slowest ended %lld ms after "
            "its interrupt (bound %lld ms)\n",
            static_cast<long long>(g->probes_interrupted),
            static_cast<long long>(Millis(g->slowest_end)),
            static_cast<long long>(Millis(g->watchdog->bound())));
    g->watchdog.reset();
    g->probe.reset();
    g->engine.reset();
    g->mgr.reset();
    delete g;
    g = nullptr;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int inputs = 0;
  const std::string sql(reinterpret_cast<const char*>(data), size);
  ProbeInterrupt(sql);
  const Outcome out = RunQuery(sql);
  switch (out.state) {
    case ExecState::kFinished:
      FUZZ_CHECK(!out.error.has_value(), "finished with an error", out.error->message);
      break;
    case ExecState::kFailed:
      FUZZ_CHECK(out.error.has_value(), "failed without an error", sql);
      FUZZ_CHECK(IsKnownError(*out.error), "unknown error code/name/type",
                 std::to_string(out.error->code) + " " + out.error->name + ": " +
                     out.error->message);
      FUZZ_CHECK(!out.error->message.empty(), "empty error message", sql);
      CheckErrorLocation(sql, *out.error);
      break;
    case ExecState::kCancelled:
      FUZZ_CHECK(out.cancelled_by_us, "cancelled, but nobody cancelled it", sql);
      FUZZ_CHECK(out.error.has_value() && out.error->name == "USER_CANCELED",
                 "a cancelled query does not say USER_CANCELED", sql);
      break;
    default:
      FUZZ_CHECK(false, "the query ended in a non-terminal state", QueryState::ExecStateName(out.state));
  }
  if (++inputs % kReadOnlyCheckEvery == 0) CheckReadOnly();
  return 0;
}
