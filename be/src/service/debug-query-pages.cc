// The debug pages about one query: its statement, its detail page and data, its plan, and
// cancel from the pages (registered by RegisterDebugPages() in debug-pages.cc).

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "service/access-control.h"
#include "service/coordinator-server.h"
#include "service/debug-pages-internal.h"
#include "service/debug-pages.h"
#include "service/protocol-json.h"
#include "service/query-history-convert.h"
#include "service/query-history.h"
#include "service/query-plan.h"
#include "service/statement-service.h"
#include "util/status.h"
#include "util/unique-id.h"

namespace qr::debug_pages::internal {
namespace {

/// Reads the 'query_id' parameter. On failure returns false with the 400 answer in '*error'.
bool ParseQueryIdParam(const HttpRequest& req, UniqueId* id, HttpResponse* error) {
  bool present = false;
  std::string text = req.QueryParam("query_id", &present);
  if (!present) {
    *error = JsonError(400, "Missing query_id: send ?query_id=<16 hex digits>:<16 hex digits>");
    return false;
  }
  Status s = ParseId(text, id);
  if (!s.ok()) {
    *error = JsonError(400, s.message());
    return false;
  }
  return true;
}

HttpResponse UnknownQuery(const UniqueId& id) {
  return JsonError(404, "Query " + PrintId(id) + " is not known (never existed, or dropped "
                            "from the query log and the query history)");
}

/// What a per-query page does with its query once found and accessible.
using WithQuery =
    std::function<void(ClientRequestStatePtr state, ResponseCallback respond)>;

/// Calls 'then' with query 'id' if it exists and the requester may access it (see
/// AccessControl), else answers 404. A query in memory (running, or in the completed-query
/// log) is handed over on this thread. One past the log is read from the durable history on
/// the listing threads (--queries_list_threads), never on the I/O thread: the read may wait
/// for the disk, and every other connection of this I/O thread with it; 'then' then runs
/// there. When --queries_list_max_pending are pending the answer is 503 (QueuedOnWorkers).
void WithAccessibleQuery(const Ctx& ctx, const HttpRequest& req, const UniqueId& id,
                         ResponseCallback respond, WithQuery then) {
  if (ClientRequestStatePtr state = ctx->coordinator->Find(id)) {
    if (!ctx->access->MayAccess(ctx->access->Identify(req), *state)) {
      return respond(UnknownQuery(id));
    }
    return then(std::move(state), std::move(respond));
  }
  const QueryHistory* history = ctx->coordinator->options().history;
  std::optional<HistoryIndexEntry> entry;
  if (history != nullptr) entry = history->index().Find(id);
  if (!entry) return respond(UnknownQuery(id));
  QueuedOnWorkers(*ctx, "requests for queries in the history",
                  [ctx, who = ctx->access->Identify(req), id, entry = *entry, respond,
                   then = std::move(then)] {
                    // Past the log, in the durable history: one record read from its segment.
                    std::vector<std::optional<QueryHistoryRecord>> records;
                    ctx->coordinator->options().history->ReadRecords({entry}, &records);
                    ClientRequestStatePtr state;
                    if (records[0]) state = RestoreFromHistory(std::move(*records[0]));
                    if (!state || !ctx->access->MayAccess(who, *state)) {
                      return respond(UnknownQuery(id));
                    }
                    then(std::move(state), respond);
                  },
                  respond);
}

/// True when query 'id' is another member's and the forwarder took 'req' over (forwarded to
/// the owner, or answered REMOTE_HOST_GONE when the owner is gone).
bool Forwarded(const PageContext& ctx, HttpRequest& req, const UniqueId& id,
               ResponseCallback& respond,
               std::chrono::milliseconds extra_wait = std::chrono::milliseconds(0)) {
  Forwarder* forwarder = ctx.server->forwarder();
  if (forwarder == nullptr || ctx.coordinator->Find(id) != nullptr) return false;
  return forwarder->MaybeForward(
      id, req, extra_wait,
      [id](const std::string& message) {
        return FailedElsewhereJson(id, QueryError::RemoteHostGone(message));
      },
      ctx.server->webserver()->io_context(), respond);
}

/// True, with a 403 in '*denied', when a state-changing request may come from another site's
/// page because it lacks the protocol user header (a cross-site form cannot send custom
/// headers, and a cross-origin fetch() with one needs a CORS preflight this server never
/// grants). Browsers send cached Basic credentials along with a cross-site form post, so
/// without this a hostile page could cancel an admin's way through the queries whose ids it
/// knows. (A foreign Origin or Referer is refused before any handler: http/http-origin.h.)
bool IsCrossSite(const HttpRequest& req, HttpResponse* denied) {
  if (AccessControl::HasUserHeader(req)) return false;
  *denied = JsonError(403, "POST /cancel_query needs the X-Trino-User (or X-Presto-User) "
                           "header naming who cancels (with authentication, your own user "
                           "name): a request without it could be a cross-site form");
  return true;
}

}  // namespace

/// GET /query_statement?query_id=ID: the full statement as text/plain (never HTML).
void HandleQueryStatement(const Ctx& ctx, HttpRequest& req, ResponseCallback respond) {
  UniqueId id;
  HttpResponse error;
  if (!ParseQueryIdParam(req, &id, &error)) return respond(std::move(error));
  if (Forwarded(*ctx, req, id, respond)) return;
  WithAccessibleQuery(ctx, req, id, std::move(respond),
                      [](ClientRequestStatePtr state, ResponseCallback respond) {
                        HttpResponse r;
                        r.content_type = "text/plain; charset=utf-8";
                        r.shared_body = state->statement();  // shared, not copied
                        AddSecurityHeaders(&r, true);
                        respond(std::move(r));
                      });
}

/// GET /query_detail?query_id=ID: the per-query page; with 'json', its data
/// (RenderQueryDetailJson), for the query's user or an admin as /query_statement.
void HandleQueryDetail(const Ctx& ctx, HttpRequest& req, ResponseCallback respond) {
  bool json = false;
  req.QueryParam("json", &json);
  if (!json) return respond(AssetResponse(*ctx, "query.html"));
  UniqueId id;
  HttpResponse error;
  if (!ParseQueryIdParam(req, &id, &error)) return respond(std::move(error));
  if (Forwarded(*ctx, req, id, respond)) return;
  WithAccessibleQuery(
      ctx, req, id, std::move(respond),
      [](ClientRequestStatePtr state, ResponseCallback respond) {
        HttpResponse r =
            HttpResponse::Json(200, debug_pages::RenderQueryDetailJson(*state) + "\n");
        AddSecurityHeaders(&r, false);
        respond(std::move(r));
      });
}

/// GET /query_plan?query_id=ID: SQLite's plan of the query's statement, explained (never
/// run) by an EXPLAIN query that goes through admission like any statement (query-plan.h);
/// answered when that query is done, within --query_plan_timeout_ms.
void HandleQueryPlan(const Ctx& ctx, HttpRequest& req, ResponseCallback respond) {
  UniqueId id;
  HttpResponse error;
  if (!ParseQueryIdParam(req, &id, &error)) return respond(std::move(error));
  // Another member's query is explained by its owner, which may take its plan timeout.
  if (Forwarded(*ctx, req, id, respond, ctx->server->options().query_plan_timeout)) return;
  WithAccessibleQuery(ctx, req, id, std::move(respond), [ctx, id](
                                                            ClientRequestStatePtr state,
                                                            ResponseCallback respond) {
    ExplainBound bound{&ctx->server->webserver()->io_context(),
                       ctx->server->options().query_plan_timeout,
                       &ctx->server->query_plan_timeouts()};
    ExplainStatement(ctx->coordinator, *state, bound,
                     [id, respond = std::move(respond)](StatementPlanResult result) {
                       Json body;
                       body["query_id"] = PrintId(id);
                       body["plan"] = result.plan.empty() ? Json(nullptr) : Json(result.plan);
                       body["no_plan_reason"] = result.no_plan_reason.empty()
                                                    ? Json(nullptr)
                                                    : Json(result.no_plan_reason);
                       // The EXPLAIN query's error (admission refused it, or it failed).
                       Json error = nullptr;
                       if (result.error) {
                         error = Json::object();
                         error["name"] = result.error->name;
                         error["type"] = ErrorTypeName(result.error->type);
                         error["message"] = result.error->message;
                       }
                       body["error"] = std::move(error);
                       respond(JsonResponse(200, body));
                     });
  });
}

/// POST /cancel_query?query_id=ID. Without authentication the requester is the self-asserted
/// protocol user, so the owner check prevents accidents, not attacks; with authentication it
/// is the authenticated user, and someone else's query is answered as an unknown one.
void HandleCancel(const Ctx& ctx, HttpRequest& req, ResponseCallback respond) {
  UniqueId id;
  HttpResponse error;
  if (!ParseQueryIdParam(req, &id, &error)) return respond(std::move(error));
  // Another member's query: its owner checks the user and cancels it.
  if (Forwarded(*ctx, req, id, respond)) return;
  const Principal principal = ctx->access->Identify(req);
  const std::string& user = principal.user;
  if (user.empty()) {
    HttpResponse r = JsonError(401, "No user: send the X-Trino-User (or X-Presto-User) header "
                                    "or Basic credentials naming who cancels");
    r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"coordinatord\"");
    return respond(std::move(r));
  }
  HttpResponse forged;
  if (IsCrossSite(req, &forged)) return respond(std::move(forged));
  WithAccessibleQuery(
      ctx, req, id, std::move(respond),
      [ctx, id, principal, remote = req.remote_address](
          ClientRequestStatePtr state, ResponseCallback respond) {
        const std::string& user = principal.user;
        if (user != state->user() && !principal.admin) {
          return respond(JsonError(403, "User " + QuoteForError(user) +
                                            " may not cancel query " + PrintId(id) +
                                            ": only its user or an admin (--admin_users) may"));
        }
        // False when the query had already ended: then it keeps its final state.
        bool canceled = ctx->coordinator->CancelRequest(
            state, QueryError::UserCanceled(), principal.Describe() + " (/cancel_query)");
        if (canceled) {
          LOG(INFO) << "Query " << PrintId(id) << " of "
                    << DescribeUser(state->user(), state->principal()) << " canceled by "
                    << principal.Describe() << " from " << remote
                    << " (/cancel_query of the debug pages)";
        }
        Json body;
        body["query_id"] = PrintId(id);
        body["canceled"] = canceled;
        body["state"] = ClientRequestState::StateName(state->state());
        respond(JsonResponse(200, body));
      });
}

}  // namespace qr::debug_pages::internal
