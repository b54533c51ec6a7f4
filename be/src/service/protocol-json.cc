#include "service/protocol-json.h"

#include <chrono>
#include <ctime>

#include "runtime/json-encoding.h"
#include "service/debug-pages.h"

namespace qr {
namespace {

void AppendKey(const char* key, std::string* out) {
  out->push_back('"');
  out->append(key);
  out->append("\":");
}

void AppendIntField(const char* key, int64_t v, std::string* out) {
  AppendKey(key, out);
  AppendJsonInt(v, out);
  out->push_back(',');
}

void AppendNextUri(const ClientRequestState& req, const ResultsUris& uris, bool queued,
                   int64_t token, std::string* out) {
  out->append("\"nextUri\":\"");
  out->append(uris.base);  // validated by the caller: no characters that need escaping
  out->append(queued ? "/v1/statement/queued/" : "/v1/statement/executing/");
  char id[33];
  PrintId(req.query_id(), id);
  out->append(id, 33);
  out->push_back('/');
  out->append(req.slug());
  out->push_back('/');
  AppendJsonInt(token, out);
  out->append("\",");
}

void AppendHead(const ClientRequestState& req, const ResultsUris& uris, std::string* out) {
  char id[33];
  PrintId(req.query_id(), id);
  out->append("{\"id\":\"");
  out->append(id, 33);
  out->append("\",\"infoUri\":\"");
  out->append(uris.base);
  out->append("/v1/query/");
  out->append(id, 33);
  out->append("\",");
}

void AppendColumns(const std::vector<Column>& columns, std::string* out) {
  out->append("\"columns\":[");
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append("{\"name\":");
    AppendJsonString(columns[i].name, out);
    out->append(",\"type\":");
    AppendJsonString(columns[i].type, out);
    out->append(",\"typeSignature\":");
    out->append(columns[i].type_signature_json);
    out->push_back('}');
  }
  out->append("],");
}

// The tail shared by every QueryResults answer: stats, warnings, closing brace.
/// The response headers of a session statement (X-Trino-Added-Prepare, X-Trino-Set-Session,
/// ...) go with every answer of its query: the POST's as well, since a client may read the
/// headers of the first answer only (the Python client's PREPARE). The plan names them
/// X-Trino-*; a query submitted with the X-Presto-* headers gets X-Presto-* ones.
void AddSessionHeaders(const ClientRequestState& req, HttpResponse* resp) {
  constexpr std::string_view kTrino = "X-Trino-";
  for (const auto& [name, value] : req.plan().response_headers) {
    if (req.session().presto_headers && name.starts_with(kTrino)) {
      resp->headers.emplace_back("X-Presto-" + name.substr(kTrino.size()), value);
    } else {
      resp->headers.emplace_back(name, value);
    }
  }
}

/// "updateType":"PREPARE", for a session statement; nothing for a query.
void AppendUpdateType(const ClientRequestState& req, std::string* out) {
  if (req.plan().update_type == nullptr) return;
  out->append("\"updateType\":\"");
  out->append(req.plan().update_type);
  out->append("\",");
}

void AppendTail(const ClientRequestState& req, const char* state, std::string* out) {
  AppendUpdateType(req, out);
  AppendStatsJson(state, req.GetInfo(), out);
  out->append(",\"warnings\":[]}");
}

}  // namespace

void AppendStatsJson(const char* state, const ClientRequestState::Info& info, std::string* out) {
  const bool queued = std::string_view(state) == "QUEUED";
  out->append("\"stats\":{\"state\":\"");
  out->append(state);
  out->append("\",\"queued\":");
  out->append(queued ? "true" : "false");
  out->append(",\"scheduled\":");
  out->append(queued ? "false" : "true");
  out->push_back(',');
  AppendIntField("nodes", queued ? 0 : 1, out);
  AppendIntField("totalSplits", 0, out);
  AppendIntField("queuedSplits", 0, out);
  AppendIntField("runningSplits", 0, out);
  AppendIntField("completedSplits", 0, out);
  AppendIntField("cpuTimeMillis", info.cpu_time_ns / 1000000, out);
  AppendIntField("wallTimeMillis", info.elapsed_ms, out);
  AppendIntField("queuedTimeMillis", info.queued_ms, out);
  AppendIntField("elapsedTimeMillis", info.elapsed_ms, out);
  AppendIntField("processedRows", info.rows_produced, out);
  AppendIntField("processedBytes", info.bytes_delivered, out);
  AppendIntField("physicalInputBytes", 0, out);
  AppendIntField("peakMemoryBytes", 0, out);
  AppendKey("spilledBytes", out);
  out->append("0}");
}

void AppendErrorJson(const QueryError& error, std::string* out) {
  out->append("{\"message\":");
  AppendJsonString(error.message, out);
  out->push_back(',');
  AppendIntField("errorCode", error.code, out);
  out->append("\"errorName\":");
  AppendJsonString(error.name, out);
  out->append(",\"errorType\":\"");
  out->append(ErrorTypeName(error.type));
  out->append("\",");
  if (error.line > 0 && error.column > 0) {
    out->append("\"errorLocation\":{");
    AppendIntField("lineNumber", error.line, out);
    AppendKey("columnNumber", out);
    AppendJsonInt(error.column, out);
    out->append("},");
  }
  out->append("\"failureInfo\":{\"type\":");
  AppendJsonString(error.name, out);
  out->append(",\"message\":");
  AppendJsonString(error.message, out);
  out->append(",\"suppressed\":[],\"stack\":[]}}");
}

void RenderQueryResults(const ClientRequestState& req, const QueryPage& page,
                        const ResultsUris& uris, HttpResponse* resp) {
  AddSessionHeaders(req, resp);
  std::string& out = resp->body;
  out.reserve(1024);
  AppendHead(req, uris, &out);
  if (page.next_token) AppendNextUri(req, uris, page.queued, *page.next_token, &out);
  if (page.columns) AppendColumns(*page.columns, &out);
  if (page.error) {
    out.append("\"error\":");
    AppendErrorJson(*page.error, &out);
    out.push_back(',');
  }
  std::string* tail = &out;
  if (page.page && page.page->num_rows > 0 && page.page->json_rows) {
    out.append("\"data\":[");
    resp->shared_body = page.page->json_rows;
    tail = &resp->body_tail;
    tail->append("],");
  }
  AppendTail(req, page.state, tail);
}

void RenderSubmitted(const ClientRequestState& req, const ResultsUris& uris,
                     HttpResponse* resp) {
  AddSessionHeaders(req, resp);
  std::string& out = resp->body;
  AppendHead(req, uris, &out);
  AppendNextUri(req, uris, /*queued=*/true, 0, &out);
  AppendUpdateType(req, &out);
  ClientRequestState::Info info = req.GetInfo();
  AppendStatsJson("QUEUED", info, &out);
  out.append(",\"warnings\":[]}");
}

void RenderFailedElsewhere(const UniqueId& id, const QueryError& error, const ResultsUris& uris,
                           HttpResponse* resp) {
  char text[33];
  PrintId(id, text);
  std::string& out = resp->body;
  out.append("{\"id\":\"");
  out.append(text, 33);
  out.append("\",\"infoUri\":\"");
  out.append(uris.base);
  out.append("/v1/query/");
  out.append(text, 33);
  out.append("\",\"error\":");
  AppendErrorJson(error, &out);
  out.push_back(',');
  AppendStatsJson("FAILED", ClientRequestState::Info{}, &out);
  out.append(",\"warnings\":[]}");
  resp->status = 200;
  resp->content_type = "application/json";
}

HttpResponse FailedElsewhereJson(const UniqueId& id, const QueryError& error) {
  std::string body = "{\"queryId\":\"" + PrintId(id) + "\",\"state\":\"FAILED\",\"error\":";
  AppendErrorJson(error, &body);
  body += "}\n";
  return HttpResponse::Json(410, std::move(body));
}

void AppendQueryInfoJson(const ClientRequestState& req, const ResultsUris& uris,
                         std::string* out, size_t stmt_size) {
  ClientRequestState::Info info = req.GetInfo();
  const char* state = ClientRequestState::StateName(info.state);
  if (info.state == ClientRequestState::State::kCanceled) state = "FAILED";
  char id[33];
  PrintId(req.query_id(), id);
  out->append("{\"queryId\":\"");
  out->append(id, 33);
  out->append("\",\"state\":\"");
  out->append(state);
  out->append("\",\"query\":");
  const std::string_view stmt = *req.statement();
  const std::string_view shown = debug_pages::TruncateChars(stmt, stmt_size);
  AppendJsonString(shown, out);
  if (stmt_size != SIZE_MAX) {
    out->append(shown.size() < stmt.size() ? ",\"queryTruncated\":true"
                                           : ",\"queryTruncated\":false");
  }
  out->append(",\"session\":{\"user\":");
  AppendJsonString(req.session().user, out);
  out->append(",\"source\":");
  AppendJsonString(req.session().source, out);
  out->append(",\"catalog\":");
  AppendJsonString(req.session().catalog, out);
  out->append(",\"schema\":");
  AppendJsonString(req.session().schema, out);
  // Client info and tags are the client's text: cut in listings like the statement.
  out->append(",\"clientInfo\":");
  AppendJsonString(debug_pages::TruncateChars(req.session().client_info, stmt_size), out);
  out->append(",\"clientTags\":[");
  const std::vector<std::string>& tags = req.session().client_tags;
  for (size_t i = 0; i < tags.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonString(debug_pages::TruncateChars(tags[i], stmt_size), out);
  }
  out->append("]},\"self\":\"");
  out->append(uris.base);
  out->append("/v1/query/");
  out->append(id, 33);
  out->append("\",\"createTime\":");
  AppendJsonInt(std::chrono::duration_cast<std::chrono::milliseconds>(
                    req.submit_wall_time().time_since_epoch()).count(), out);
  out->append(",\"rowsDelivered\":");
  AppendJsonInt(info.rows_delivered, out);
  out->push_back(',');
  if (info.error) {
    out->append("\"errorCode\":{\"code\":");
    AppendJsonInt(info.error->code, out);
    out->append(",\"name\":");
    AppendJsonString(info.error->name, out);
    out->append(",\"type\":\"");
    out->append(ErrorTypeName(info.error->type));
    out->append("\"},\"error\":");
    AppendErrorJson(*info.error, out);
    out->push_back(',');
  }
  if (!info.blocked_reason.empty()) {
    out->append("\"blockedReason\":");
    AppendJsonString(info.blocked_reason, out);
    out->push_back(',');
  }
  AppendStatsJson(state, info, out);
  out->push_back('}');
}

}  // namespace qr
