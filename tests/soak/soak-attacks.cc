#include "soak/soak-attacks.h"

#include <string>
#include <string_view>

#include "loadgen/loadgen-http.h"

namespace qr::soak {

namespace {

/// Follows 'next' to the final answer, which is left in '*a' (with every answer's body
/// appended to '*bodies' if not null); false (problem recorded) on a transport error or more
/// than 'max_pages' answers.
bool RunToEnd(SoakConnection* c, const char* who, FaultCounters* counters, std::string next,
              Answer* a, std::string* bodies = nullptr, int max_pages = 10000) {
  for (int pages = 0; !next.empty(); ++pages) {
    if (pages > max_pages) {
      counters->Problem(std::string(who) + ": more than " + std::to_string(max_pages) +
                        " answers");
      return false;
    }
    if (!Advance(c, who, counters, &next, a)) return false;
    if (bodies != nullptr) *bodies += a->body;
  }
  return true;
}

/// An answer without its "stats" object, which is rendered anew each time (elapsed times):
/// what must be the same when an answered page is fetched again (ids, URIs, columns, rows).
std::string_view WithoutStats(const std::string& body) {
  return std::string_view(body).substr(0, body.find("\"stats\":"));
}

std::string ErrorName(const Answer& a) {
  return std::string(loadgen::FindJsonString(a.body, "errorName").value_or(""));
}

std::string ErrorType(const Answer& a) {
  return std::string(loadgen::FindJsonString(a.body, "errorType").value_or(""));
}

/// Runs 'sql' to its end; the final answer in '*a'.
bool RunStatement(const FaultOptions& o, const char* who, const std::string& sql,
                  FaultCounters* counters, Answer* a, std::string* bodies = nullptr) {
  SoakConnection c(o.endpoint);
  std::string id, next;
  if (!Submit(&c, sql, who, counters, &id, &next)) return false;
  return RunToEnd(&c, who, counters, next, a, bodies);
}

}  // namespace

void NeverPoll(const FaultOptions& o, const StopSignal&, int, FaultCounters* counters) {
  SoakConnection c(o.endpoint);
  std::string id, next;
  if (!Submit(&c, o.multi_page_sql, "never polled", counters, &id, &next)) return;
  counters->Injected(Fault::kNeverPolled);
  counters->abandoned.fetch_add(1);
}

void WideRow(const FaultOptions& o, const StopSignal&, int, FaultCounters* counters) {
  std::string sql = "SELECT ";
  for (int i = 0; i < 60; ++i) {
    // Values of the default --max_value_mb (2 MiB): the row, not one value, is too big.
    sql += (i > 0 ? ", zeroblob(2000000) c" : "zeroblob(2000000) c") + std::to_string(i);
  }
  Answer a;
  if (!RunStatement(o, "wide row", sql, counters, &a)) return;
  counters->Injected(Fault::kWideRow);
  if (ErrorType(a) != "INSUFFICIENT_RESOURCES" ||
      ErrorName(a).find("MEMORY_LIMIT") == std::string::npos) {
    counters->Problem("wide row: expected an EXCEEDED_*_MEMORY_LIMIT error, got '" +
                      ErrorName(a) + "': " + a.body.substr(0, 300));
  }
}

void InstrBomb(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters) {
  // Quadratic with SQLite's own instr (minutes); linear with the daemon's. Every other one
  // can match, at the very end.
  const bool match = i % 2 == 1;
  const std::string sql = std::string("SELECT instr(printf('%.*c', 2000000, 'a')") +
                          (match ? " || 'b'" : "") +
                          ", printf('%.*c', 1000000, 'a') || 'b')";
  Answer a;
  std::string bodies;
  if (!RunStatement(o, "instr bomb", sql, counters, &a, &bodies)) return;
  counters->Injected(Fault::kInstrBomb);
  const std::string expected = match ? "\"data\":[[1000001]]" : "\"data\":[[0]]";
  // SQLite's heap is shared: while a wide row fills it, this one may fail for memory too.
  const bool heap_full = ErrorName(a) == "EXCEEDED_GLOBAL_MEMORY_LIMIT" &&
                         a.body.find("--sqlite_heap_limit_mb") != std::string::npos;
  if (heap_full) return;
  if (loadgen::QueryResultsState(a.body) != "FINISHED" ||
      bodies.find(expected) == std::string::npos) {
    counters->Problem("instr bomb: expected FINISHED with " + expected + ", ended '" +
                      ErrorName(a) + "': " + bodies.substr(0, 300));
  }
}

void HugeSort(const FaultOptions& o, const StopSignal&, int, FaultCounters* counters) {
  // 60k x 300 rows of ~60 bytes to sort: ~1 GB of temporary files, far past the soak's
  // per-query spill quota.
  const std::string sql =
      "SELECT a.l_orderkey, b.l_comment FROM lineitem a, "
      "(SELECT l_comment FROM lineitem LIMIT 300) b ORDER BY a.l_comment, b.l_comment";
  Answer a;
  if (!RunStatement(o, "huge sort", sql, counters, &a)) return;
  counters->Injected(Fault::kHugeSort);
  const std::string name = ErrorName(a);
  if (name != "EXCEEDED_SPILL_LIMIT" && name != "EXCEEDED_TIME_LIMIT") {
    counters->Problem("huge sort: expected EXCEEDED_SPILL_LIMIT, got '" + name + "': " +
                      a.body.substr(0, 300));
  }
}

void ReGet(const FaultOptions& o, const StopSignal&, int, FaultCounters* counters) {
  SoakConnection c(o.endpoint);
  std::string id, next;
  Answer first;
  if (!Submit(&c, o.multi_page_sql, "reget", counters, &id, &next)) return;
  // Up to the first answer with rows.
  std::string answered;
  do {
    answered = next;
    if (!Advance(&c, "reget", counters, &next, &first)) return;
  } while (!next.empty() && first.body.find("\"data\"") == std::string::npos);
  if (next.empty()) return counters->Problem("reget: the multi-page query ended on page 1");
  for (int k = 0; k < 10; ++k) {
    Answer again;
    const bool ok = c.Request("GET", answered, {}, Deadline(), &again);
    const bool same = WithoutStats(again.body) == WithoutStats(first.body);
    if (!ok || again.status != 200 || !same) {
      return counters->Problem("reget: GET of the answered " + answered + " -> " +
                               std::to_string(again.status) + ", " +
                               (same ? "the same" : "a different") + " answer");
    }
  }
  counters->Injected(Fault::kReGet);
  Answer d;
  if (!c.Request("DELETE", "/v1/query/" + id, {}, Deadline(), &d) || d.status != 204) {
    counters->Problem("reget: DELETE -> " + (d.status ? std::to_string(d.status) : c.error()));
  }
}

}  // namespace qr::soak
