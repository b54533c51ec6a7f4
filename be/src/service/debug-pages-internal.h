#pragma once

// What the debug pages' handlers share across their files (debug-pages.cc,
// debug-query-pages.cc): the page context and the response helpers. Not for other users.

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "http/webserver.h"

namespace qr {

class AccessControl;
class CoordinatorServer;
class QueryCoordinator;

namespace debug_pages::internal {

using Json = nlohmann::ordered_json;

/// A static file of the pages, loaded once: never copied per request.
struct Asset {
  std::string content_type;
  std::shared_ptr<const std::string> body;
};

/// What every handler needs. Immutable after RegisterDebugPages().
struct PageContext {
  CoordinatorServer* server;
  QueryCoordinator* coordinator;
  const AccessControl* access;
  int stmt_size;
  size_t max_limit;
  std::string www_dir;  // empty: the compiled-in assets
  std::unordered_map<std::string, Asset> assets;  // by file name
};
using Ctx = std::shared_ptr<const PageContext>;

/// Headers of every debug response; pages also get a strict CSP so that even a rendering bug
/// could not run injected script.
void AddSecurityHeaders(HttpResponse* r, bool page);
HttpResponse JsonResponse(unsigned status, const Json& body);
/// {"error": message}.
HttpResponse JsonError(unsigned status, std::string message);
HttpResponse TextResponse(unsigned status, std::string text);
/// The asset 'name' (shared, not copied), or a 500 naming --www_dir when it is missing.
HttpResponse AssetResponse(const PageContext& ctx, const std::string& name);

/// Runs 'task' on the listing threads (--queries_list_threads): work that may read the
/// query history, kept off the HTTP I/O threads. When --queries_list_max_pending tasks are
/// queued or running, answers 503 with Retry-After through 'respond' instead ('what' names
/// the request in the message).
void QueuedOnWorkers(const PageContext& ctx, const std::string& what, std::function<void()> task,
                     const ResponseCallback& respond);

/// The per-query pages (debug-query-pages.cc).
void HandleQueryStatement(const Ctx& ctx, HttpRequest& req, ResponseCallback respond);
void HandleQueryDetail(const Ctx& ctx, HttpRequest& req, ResponseCallback respond);
void HandleQueryPlan(const Ctx& ctx, HttpRequest& req, ResponseCallback respond);
void HandleCancel(const Ctx& ctx, HttpRequest& req, ResponseCallback respond);

}  // namespace debug_pages::internal
}  // namespace qr
