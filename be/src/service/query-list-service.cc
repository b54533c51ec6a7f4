// GET /v1/query (the Trino list, cluster-wide in a cluster), GET and DELETE /v1/query/{id}.

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gflags/gflags.h>
#include <nlohmann/json.hpp>

#include "cluster/cluster-view.h"
#include "service/protocol-json.h"
#include "service/statement-service.h"

DECLARE_int32(query_stmt_size);

namespace qr {

namespace {

/// The members that did not answer a cluster-wide GET /v1/query, by id (comma-separated).
constexpr char kFailedMembersHeader[] = "X-Qr-Cluster-Failed-Members";

/// Appends the items of member list 'answer' ("[...]" of QueryInfo objects) to 'body' (an
/// open array, 'empty' when it has no item yet). False when it is not a JSON array.
bool AppendListItems(const std::string& answer, std::string* body, bool* empty) {
  const nlohmann::json parsed = nlohmann::json::parse(answer, nullptr, false);
  if (!parsed.is_array()) return false;
  if (parsed.empty()) return true;
  const size_t open = answer.find('[');
  const size_t close = answer.rfind(']');
  if (!*empty) body->push_back(',');
  body->append(answer, open + 1, close - open - 1);
  *empty = false;
  return true;
}

}  // namespace

std::string StatementService::LocalQueryList(const HttpRequest& req) const {
  ResultsUris uris{BaseUri(req)};
  const Principal principal = access_->Identify(req);
  // Statements are cut as on /queries?json: the listing must not grow with what clients send.
  const size_t stmt_size = static_cast<size_t>(
      options_.list_stmt_size > 0 ? options_.list_stmt_size : FLAGS_query_stmt_size);
  std::string body = "[";
  bool first = true;
  auto add = [&](const ClientRequestStatePtr& q) {
    if (!access_->MayAccess(principal, *q)) return;
    if (!first) body.push_back(',');
    first = false;
    AppendQueryInfoJson(*q, uris, &body, stmt_size);
  };
  for (const auto& q : coordinator_->InFlight()) add(q);
  for (const auto& q : coordinator_->Completed()) add(q);
  body.push_back(']');
  return body;
}

void StatementService::HandleQueryList(HttpRequest& req, ResponseCallback respond) {
  std::string local = LocalQueryList(req);
  if (cluster_view_ == nullptr || IsLocalOnlyRequest(req, access_->authentication_enabled())) {
    respond(HttpResponse::Json(200, std::move(local)));
    return;
  }
  // Every other member's list, in parallel on this I/O thread's io_context, appended to ours.
  cluster_view_->FanOut(
      SubRequestOf(req), webserver_->io_context(),
      [local = std::move(local), respond = std::move(respond)](std::vector<MemberAnswer> others) {
        std::string body = local;
        body.pop_back();  // the ']'
        bool empty = body.size() == 1;
        std::string failed;
        for (const MemberAnswer& a : others) {
          if (a.ok && AppendListItems(a.response.body, &body, &empty)) continue;
          if (!failed.empty()) failed.push_back(',');
          failed += std::to_string(a.member.id);
        }
        body.push_back(']');
        HttpResponse r = HttpResponse::Json(200, std::move(body));
        if (!failed.empty()) r.headers.emplace_back(kFailedMembersHeader, std::move(failed));
        respond(std::move(r));
      });
}

void StatementService::HandleQueryGet(HttpRequest& req, ResponseCallback respond) {
  std::string_view id_text = std::string_view(req.path).substr(strlen("/v1/query/"));
  UniqueId id;
  Status s = ParseId(id_text, &id);
  if (!s.ok()) {
    respond(HttpResponse::Text(400, s.message() + "\n"));
    return;
  }
  if (Forwarded(req, id, std::chrono::milliseconds(0), /*results=*/false, respond)) return;
  ClientRequestStatePtr q = FindAccessible(req, id);
  if (q == nullptr) {
    respond(HttpResponse::Text(410, "Query " + PrintId(id) + " is unknown or expired\n"));
    return;
  }
  std::string body;
  AppendQueryInfoJson(*q, ResultsUris{BaseUri(req)}, &body);
  respond(HttpResponse::Json(200, std::move(body)));
}

void StatementService::HandleQueryDelete(HttpRequest& req, ResponseCallback respond) {
  std::string_view id_text = std::string_view(req.path).substr(strlen("/v1/query/"));
  UniqueId id;
  Status s = ParseId(id_text, &id);
  if (!s.ok()) {
    respond(HttpResponse::Text(400, s.message() + "\n"));
    return;
  }
  if (Forwarded(req, id, std::chrono::milliseconds(0), /*results=*/false, respond)) return;
  // Idempotent, like DELETE of a nextUri: an unknown or finished query is not an error, and
  // someone else's query (with authentication on) is answered as an unknown one.
  if (FindAccessible(req, id) != nullptr) {
    (void)coordinator_->Cancel(id, access_->Identify(req).Describe() + " from " +
                                       req.remote_address + " (DELETE /v1/query/{id})");
  }
  respond(HttpResponse::Text(204, ""));
}

}  // namespace qr
