// GET /query_detail?json&query_id=ID: one query in full, for its page (be/www/query.html).

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "service/client-request-state.h"
#include "service/debug-pages.h"
#include "util/unique-id.h"

namespace qr {
namespace debug_pages {
namespace {

using Json = nlohmann::ordered_json;
using WallTime = std::chrono::system_clock::time_point;

Json TimeOrNull(const std::optional<WallTime>& t) {
  return t ? Json(FormatIsoTime(*t)) : Json(nullptr);
}

}  // namespace

std::string RenderQueryDetailJson(const ClientRequestState& req) {
  ClientRequestState::Info info = req.GetInfo();
  const char* state = DisplayState(req, info.state);
  static const std::string kEmpty;
  const std::string& stmt = req.statement() ? *req.statement() : kEmpty;
  const SessionInfo& session = req.session();
  Json q;
  q["query_id"] = PrintId(req.query_id());
  q["state"] = state;
  q["terminal"] = ClientRequestState::IsTerminal(info.state);
  q["statement"] = stmt;
  q["statement_length"] = CountChars(stmt);
  q["user"] = req.user();
  // With authentication: who authenticated (an admin may run a query as another user).
  q["principal"] = req.principal().empty() ? Json(nullptr) : Json(req.principal());
  q["source"] = session.source;
  q["client_info"] = session.client_info;
  q["client_tags"] = session.client_tags;
  q["client_address"] = req.client_address();
  Json s;
  s["catalog"] = session.catalog;
  s["schema"] = session.schema;
  Json props = Json::object();
  for (const auto& [name, value] : session.properties) props[name] = value;
  s["properties"] = std::move(props);
  Json prepared = Json::array();
  for (const auto& entry : session.prepared_statements) prepared.push_back(entry.first);
  s["prepared_statements"] = std::move(prepared);
  q["session"] = std::move(s);
  // The timeline: each point once reached (null before, and for what the history does not
  // keep: a query of an earlier run has no executor start or first row).
  Json t;
  t["submitted"] = FormatIsoTime(req.submit_wall_time());
  t["queued_ms"] = info.queued_ms;
  t["executor_started"] = TimeOrNull(info.exec_start_wall_time);
  t["first_row"] = TimeOrNull(info.first_row_wall_time);
  t["finished"] = TimeOrNull(info.end_wall_time);
  t["elapsed_ms"] = info.elapsed_ms;
  q["timeline"] = std::move(t);
  Json c;
  c["rows_fetched"] = info.rows_delivered;
  c["bytes_fetched"] = info.bytes_delivered;
  c["rows_produced"] = info.rows_produced;
  c["cpu_ms"] = info.cpu_time_ns / 1000000;
  c["vm_steps"] = info.vm_steps;
  q["counters"] = std::move(c);
  if (info.error) {
    Json e;
    e["name"] = info.error->name;
    e["code"] = info.error->code;
    e["type"] = ErrorTypeName(info.error->type);
    e["message"] = info.error->message;
    // 1-based line and column in the statement; null when unknown.
    e["line"] = info.error->line > 0 ? Json(info.error->line) : Json(nullptr);
    e["column"] = info.error->column > 0 ? Json(info.error->column) : Json(nullptr);
    q["error"] = std::move(e);
  } else {
    q["error"] = nullptr;
  }
  q["canceled_by"] = info.canceled_by.empty() ? Json(nullptr) : Json(info.canceled_by);
  q["blocked_reason"] = info.blocked_reason.empty() ? Json(nullptr) : Json(info.blocked_reason);
  return q.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace debug_pages
}  // namespace qr
