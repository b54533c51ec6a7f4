// GET /queries?json: the data of the /queries page, built from snapshots (no registry lock is
// held while it is rendered).

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "service/client-request-state.h"
#include "service/debug-pages.h"
#include "runtime/system-tables.h"
#include "runtime/utf8.h"
#include "service/queries-list.h"
#include "service/query-coordinator.h"
#include "service/query-history.h"
#include "util/unique-id.h"

namespace qr {
namespace debug_pages {
namespace {

using Json = nlohmann::ordered_json;

Json ErrorJson(const std::optional<QueryError>& error) {
  if (!error) return nullptr;
  Json e;
  e["name"] = error->name;
  e["code"] = error->code;
  e["type"] = ErrorTypeName(error->type);
  e["message"] = error->message;
  return e;
}

/// One query's row. 'info' is read once, so the fields agree with each other.
Json QueryJson(const ListedQuery& row, size_t stmt_size) {
  const ClientRequestState& req = *row.request;
  const ClientRequestState::Info& info = row.info;
  static const std::string kEmpty;
  const std::string& stmt = req.statement() ? *req.statement() : kEmpty;
  std::string_view shown = TruncateChars(stmt, stmt_size);
  Json q;
  q["query_id"] = PrintId(req.query_id());
  q["user"] = req.user();
  q["source"] = req.session().source;
  // The client's text: cut like the statement (the full text is one request away).
  q["client_info"] = std::string(TruncateChars(req.session().client_info, stmt_size));
  Json tags = Json::array();
  for (const std::string& tag : req.session().client_tags) {
    tags.push_back(std::string(TruncateChars(tag, stmt_size)));
  }
  q["client_tags"] = std::move(tags);
  q["state"] = row.display_state;
  q["statement"] = std::string(shown);
  q["statement_length"] = CountChars(stmt);
  q["statement_truncated"] = shown.size() < stmt.size();
  q["start_time"] = FormatIsoTime(req.submit_wall_time());
  q["end_time"] = info.end_wall_time ? Json(FormatIsoTime(*info.end_wall_time)) : Json(nullptr);
  q["duration_ms"] = info.elapsed_ms;
  q["queued_ms"] = info.queued_ms;
  q["rows_fetched"] = info.rows_delivered;
  q["rows_produced"] = info.rows_produced;
  q["cpu_ms"] = info.cpu_time_ns / 1000000;
  q["vm_steps"] = info.vm_steps;
  q["error"] = ErrorJson(info.error);
  return q;
}

Json SummaryJson(const QueryCoordinator& coordinator, size_t in_flight, size_t completed) {
  const QueryHistory* history = coordinator.options().history;
  QueryCoordinator::Metrics m = coordinator.GetMetrics();
  Json s;
  s["in_flight"] = in_flight;
  s["running"] = m.running;
  s["queued"] = m.queued;
  s["completed_in_log"] = completed;
  // Every retained record of the durable history (null: the history is off).
  s["completed_in_history"] =
      history != nullptr ? Json(history->index().size()) : Json(nullptr);
  s["submitted_total"] = m.submitted;
  s["finished_total"] = m.finished;
  s["failed_total"] = m.failed;
  s["canceled_total"] = m.canceled;
  return s;
}

Json ListJson(const QueryListPage& list, size_t stmt_size, bool row_cursors) {
  Json out = Json::array();
  for (const ListedQuery& row : list.rows) {
    out.push_back(QueryJson(row, stmt_size));
    if (row_cursors) {
      out.back()["cursor"] = EncodeCursor({row.key, row.request->query_id()});
    }
  }
  return out;
}

}  // namespace

std::string FormatIsoTime(std::chrono::system_clock::time_point t) {
  return FormatTimestampMillis(
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count(),
      TimestampStyle::kIso);
}

std::string_view TruncateChars(std::string_view s, size_t max_chars) {
  size_t i = 0;
  for (size_t chars = 0; i < s.size() && chars < max_chars; ++chars) i += Utf8CharLength(s, i);
  return s.substr(0, i);
}

size_t CountChars(std::string_view s) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++chars) i += Utf8CharLength(s, i);
  return chars;
}

std::string RenderQueriesJson(const QueryCoordinator& coordinator, int stmt_size,
                              const std::function<bool(std::string_view user)>& visible,
                              const QueryListParams& params, std::string_view scope,
                              bool row_cursors) {
  std::function<bool(const ClientRequestState&)> visible_request;
  if (visible) visible_request = [&visible](const ClientRequestState& q) { return visible(q.user()); };
  // Both lists are copies: the registry's Snapshot() and the log's, so no lock is held below
  // except each request's own, briefly, in GetInfo(). Only the rows of the page are rendered.
  QueryListPage in_flight =
      SelectQueries(coordinator.InFlight(), params, /*use_cursor=*/false, visible_request);
  bool partial = false;
  QueryListPage completed = SelectCompleted(coordinator, params, visible, &partial);
  size_t size = static_cast<size_t>(std::max(0, stmt_size));
  Json page;
  page["generated_at"] = FormatIsoTime(std::chrono::system_clock::now());
  page["query_stmt_size"] = size;
  page["limit"] = params.limit;
  if (!scope.empty()) page["scope"] = scope;
  page["summary"] = SummaryJson(coordinator, in_flight.matched, completed.matched);
  page["in_flight_matched"] = in_flight.matched;
  page["completed_matched"] = completed.matched;
  // A text search over the history read --queries_max_limit records without filling the
  // page: 'completed_matched' counts what it found so far, and next_cursor continues.
  page["completed_partial"] = partial;
  page["in_flight"] = ListJson(in_flight, size, row_cursors);
  page["completed"] = ListJson(completed, size, row_cursors);
  page["next_cursor"] = completed.next ? Json(EncodeCursor(*completed.next)) : Json(nullptr);
  // Invalid UTF-8 in a statement becomes U+FFFD instead of an exception.
  return page.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace debug_pages
}  // namespace qr
