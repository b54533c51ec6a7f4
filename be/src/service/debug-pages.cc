// The debug pages of coordinatord: small static handlers registered in one place
// (RegisterDebugPages at the bottom). The data renderers live in queries-json.cc and
// metrics-page.cc; the per-query pages in debug-query-pages.cc; the page assets in be/www,
// compiled into the binary (www-assets.h).

#include "service/debug-pages.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <absl/strings/ascii.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "service/access-control.h"
#include "service/cluster-queries.h"
#include "service/coordinator-server.h"
#include "service/debug-pages-internal.h"
#include "service/protocol-json.h"
#include "service/www-assets.h"
#include "util/status.h"
#include "util/unique-id.h"

DEFINE_int32(query_stmt_size, 250,
             "Characters of a statement shown in query listings (the full text is one click "
             "away).");
DEFINE_int32(queries_max_limit, 1000,
             "Most queries of each list one GET /queries?json answers ('limit' parameter; "
             "the default is 100 or this, whichever is lower): bounds the work and the "
             "answer of one request.");
DEFINE_string(www_dir, "",
              "Serve the debug pages' assets (queries.html, ...) from this directory, read at "
              "start-up, instead of the copy compiled into the binary: for editing be/www "
              "without rebuilding (empty: the compiled-in copy).");

namespace {
bool ValidateStmtSize(const char* flag, int32_t v) {
  if (v > 0) return true;
  fprintf(stderr, "--%s must be positive, got %d\n", flag, v);
  return false;
}
}  // namespace
DEFINE_validator(query_stmt_size, &ValidateStmtSize);
DEFINE_validator(queries_max_limit, &ValidateStmtSize);

namespace qr {
namespace debug_pages::internal {

void AddSecurityHeaders(HttpResponse* r, bool page) {
  r->headers.emplace_back("X-Content-Type-Options", "nosniff");
  r->headers.emplace_back("Cache-Control", "no-store");
  if (!page) return;
  r->headers.emplace_back("Content-Security-Policy",
                          "default-src 'self'; base-uri 'none'; form-action 'none'; "
                          "frame-ancestors 'none'");
  r->headers.emplace_back("X-Frame-Options", "DENY");
  r->headers.emplace_back("Referrer-Policy", "no-referrer");
}

HttpResponse JsonResponse(unsigned status, const Json& body) {
  HttpResponse r = HttpResponse::Json(
      status, body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n");
  AddSecurityHeaders(&r, false);
  return r;
}

HttpResponse JsonError(unsigned status, std::string message) {
  Json body;
  body["error"] = std::move(message);
  return JsonResponse(status, body);
}

void QueuedOnWorkers(const PageContext& ctx, const std::string& what, std::function<void()> task,
                     const ResponseCallback& respond) {
  PageWorkers* workers = ctx.server->queries_list_workers();
  if (workers->TrySubmit(std::move(task))) return;
  HttpResponse busy = JsonError(
      503, "Too many " + what + " at once (--queries_list_max_pending=" +
               std::to_string(workers->options().max_pending) +
               ", shared by /queries?json and the per-query pages of queries in the history); "
               "retry shortly");
  busy.headers.emplace_back("Retry-After", "1");
  respond(std::move(busy));
}

HttpResponse TextResponse(unsigned status, std::string text) {
  HttpResponse r = HttpResponse::Text(status, std::move(text));
  AddSecurityHeaders(&r, false);
  return r;
}

HttpResponse AssetResponse(const PageContext& ctx, const std::string& name) {
  auto it = ctx.assets.find(name);
  if (it == ctx.assets.end()) {
    return TextResponse(500, "Page asset '" + name + "' is missing from --www_dir=" +
                                 ctx.www_dir + ": point it at the be/www directory of the "
                                 "source, or leave it empty for the compiled-in copy\n");
  }
  HttpResponse r;
  r.content_type = it->second.content_type;
  r.shared_body = it->second.body;
  AddSecurityHeaders(&r, true);
  return r;
}
}  // namespace debug_pages::internal

using namespace debug_pages::internal;  // NOLINT: the shared helpers of this file's pages

namespace {

const char* ContentTypeFor(const std::filesystem::path& file) {
  std::string ext = file.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  return nullptr;
}

/// Reads the servable files of 'dir'. A missing directory is logged, not fatal: the API keeps
/// working and the HTML pages answer 500 naming the directory.
std::unordered_map<std::string, Asset> LoadAssets(const std::string& dir) {
  std::unordered_map<std::string, Asset> assets;
  std::error_code ec;  // the error_code overloads: nothing here throws
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::filesystem::directory_entry& entry = *it;
    const char* type = ContentTypeFor(entry.path());
    std::error_code file_ec;
    if (type == nullptr || !entry.is_regular_file(file_ec)) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    if (!in) {
      LOG(WARNING) << "Debug pages: cannot read " << entry.path();
      continue;
    }
    assets[entry.path().filename().string()] =
        Asset{type, std::make_shared<const std::string>(content.str())};
  }
  if (ec) LOG(WARNING) << "Debug pages: cannot list --www_dir " << dir << ": " << ec.message();
  return assets;
}

/// The compiled-in copy of be/www, made once per process (every server shares the bodies).
/// A file without a known content type is left out (DebugPagesTest checks there is none).
const std::unordered_map<std::string, Asset>& EmbeddedAssets() {
  static const auto* assets = [] {
    auto* map = new std::unordered_map<std::string, Asset>;
    for (const EmbeddedAsset& file : EmbeddedWwwAssets()) {
      const char* type = ContentTypeFor(std::filesystem::path(file.name));
      if (type == nullptr) {
        LOG(WARNING) << "Debug pages: no content type for be/www/" << file.name;
        continue;
      }
      (*map)[std::string(file.name)] =
          Asset{type, std::make_shared<const std::string>(file.data)};
    }
    return map;
  }();
  return *assets;
}


namespace http = boost::beast::http;


constexpr char kIndexHtml[] = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>coordinatord</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="/www/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/www/style.css"></head>
<body><header class="topbar"><span class="brand">coordinatord</span></header>
<main class="content"><h1>Debug pages</h1><ul class="index">
<li><a href="/queries">/queries</a>: in-flight and completed queries, with Cancel</li>
<li><a href="/queries?json">/queries?json</a>: the same data as JSON (filters, sort,
paging: docs/operations.md)</li>
<li>/query_detail?query_id=ID: one query in full, with its plan (linked from /queries)</li>
<li><a href="/metrics">/metrics</a>: Prometheus metrics</li>
<li><a href="/healthz">/healthz</a>: health check (OK, or 503 while shutting down)</li>
<li><a href="/varz">/varz</a>: command-line flags (secrets redacted)</li>
<li><a href="/v1/info">/v1/info</a>: server information (Trino protocol)</li>
<li><a href="/v1/query">/v1/query</a>: queries (Trino protocol)</li>
</ul><p class="muted">POST /cancel_query?query_id=ID cancels a query (its user or an admin).</p>
</main></body></html>
)";

/// GET / and the catch-all for unknown paths ("/" is registered as a prefix for every method,
/// so it must answer 404 and 405 as the webserver would).
void HandleRoot(const Ctx& ctx, HttpRequest& req, ResponseCallback respond) {
  if (req.path != "/") {
    respond(TextResponse(404, "Not found: " + QuoteForError(req.path, 200)));
  } else if (req.method != http::verb::get && req.method != http::verb::head) {
    HttpResponse r = TextResponse(405, "Method " + QuoteForError(req.method_string, 32) +
                                           " is not allowed for '/'; allowed: GET, HEAD");
    r.headers.emplace_back("Allow", "GET, HEAD");
    respond(std::move(r));
  } else {
    std::string page = kIndexHtml;
    // In a cluster, its members (cluster-view-service.cc).
    if (const Membership* membership = ctx->server->membership()) {
      page.insert(page.rfind("</main>"), RenderMembersHtml(*membership));
    }
    HttpResponse r = HttpResponse::Text(200, std::move(page));
    r.content_type = "text/html; charset=utf-8";
    AddSecurityHeaders(&r, true);
    respond(std::move(r));
  }
}

bool IsSecretFlag(std::string name) {
  absl::AsciiStrToLower(&name);
  for (const char* word : {"password", "secret", "key", "token"}) {
    if (name.find(word) != std::string::npos) return true;
  }
  return false;
}

/// GET /varz: one "--name=value" line per flag, sorted by name. With authentication, admins
/// only: the flags name the admins and the server's files.
void HandleVarz(const Ctx& ctx, HttpRequest& req, ResponseCallback respond) {
  if (ctx->access->authentication_enabled() && !ctx->access->IsAdmin(req.authenticated_user)) {
    respond(TextResponse(403, "Only --admin_users may read /varz: the flags name the admins "
                              "and the server's files\n"));
    return;
  }
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::sort(flags.begin(), flags.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::string out =
      "# coordinatord flags, one --name=value per line. Values of flags whose name contains\n"
      "# password, secret, key or token are shown as <redacted>.\n";
  for (const auto& f : flags) {
    out += "--" + f.name + "=" + (IsSecretFlag(f.name) ? "<redacted>" : f.current_value) + "\n";
  }
  respond(TextResponse(200, std::move(out)));
}

/// The rest of GET /queries?json, on a PageWorkers thread: the in-flight queries, a page of
/// the completed ones (query-history reads included) and, in a cluster, the other members'.
void AnswerQueriesJson(const Ctx& ctx, const HttpRequest& req,
                       const debug_pages::QueryListParams& params, const std::string& scope,
                       ResponseCallback respond) {
  const bool member = IsLocalOnlyRequest(req, ctx->access->authentication_enabled());
  const bool cluster = ctx->server->cluster_view() != nullptr && !member && scope != "local";
  std::string_view shown = ctx->server->membership() == nullptr ? ""
                           : member || cluster                  ? "member"
                                                                : "local";
  const Principal principal = ctx->access->Identify(req);
  auto visible = [&](std::string_view user) { return ctx->access->MayAccessUser(principal, user); };
  std::string body = debug_pages::RenderQueriesJson(*ctx->coordinator, ctx->stmt_size, visible,
                                                    params, shown, member || cluster);
  if (cluster) {
    return debug_pages::AnswerClusterQueries(ctx->server, req, params, std::move(body),
                                             std::move(respond));
  }
  HttpResponse r = HttpResponse::Json(200, std::move(body));
  AddSecurityHeaders(&r, false);
  respond(std::move(r));
}

void HandleQueries(const Ctx& ctx, HttpRequest& req, ResponseCallback respond) {
  bool json = false;
  req.QueryParam("json", &json);
  if (!json) {
    respond(AssetResponse(*ctx, "queries.html"));
    return;
  }
  debug_pages::QueryListParams params;
  std::string bad;
  if (!debug_pages::ParseQueryListParams(req, ctx->max_limit, &params, &bad)) {
    return respond(JsonError(400, std::move(bad)));
  }
  // In a cluster: every member's queries ("cluster", the default), or this one's ("local");
  // a member's part of another's cluster view ("member") carries each row's position.
  const std::string scope = req.QueryParam("scope");
  if (!scope.empty() && scope != "cluster" && scope != "local") {
    return respond(JsonError(400, "Bad scope: 'cluster' or 'local'"));
  }
  // Off the I/O thread: a page may read up to 64 MiB of history records, and every other
  // connection of this I/O thread would wait meanwhile. The request is copied (its session may
  // read the next one once answered); 'respond' stays here for the refusal.
  QueuedOnWorkers(*ctx, "GET /queries?json requests",
                  [ctx, copy = req, params = std::move(params), scope, respond] {
                    AnswerQueriesJson(ctx, copy, params, scope, respond);
                  },
                  respond);
}

/// GET /www/NAME: a compiled-in asset or one of --www_dir loaded at start (no path is
/// resolved).
void HandleAsset(const Ctx& ctx, HttpRequest& req, ResponseCallback respond) {
  std::string name = req.path.substr(std::string_view("/www/").size());
  if (!ctx->assets.contains(name)) {
    return respond(TextResponse(404, "Not found: " + QuoteForError(req.path, 200)));
  }
  respond(AssetResponse(*ctx, name));
}

void HandleMetrics(const Ctx& ctx, HttpRequest&, ResponseCallback respond) {
  HttpResponse r = TextResponse(200, debug_pages::RenderMetrics(ctx->server));
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  respond(std::move(r));
}

/// OK (or 503 SHUTTING_DOWN), and in a cluster a second line with the membership: etcd being
/// unreachable does not make a coordinator unhealthy, it still serves its queries.
void HandleHealthz(const Ctx& ctx, HttpRequest&, ResponseCallback respond) {
  const bool down = ctx->coordinator->shutting_down();
  std::string body = down ? "SHUTTING_DOWN\n" : "OK\n";
  if (const Membership* membership = ctx->server->membership()) {
    const Membership::Snapshot s = membership->GetSnapshot();
    body += "cluster: " + std::string(ClusterStateName(s.state)) + ", member " +
            std::to_string(s.member_id) + ", " + std::to_string(s.members.size()) +
            " members\n";
  }
  respond(TextResponse(down ? 503 : 200, std::move(body)));
}

Ctx MakeContext(const debug_pages::Options& options, CoordinatorServer* server) {
  auto ctx = std::make_shared<PageContext>();
  ctx->server = server;
  ctx->coordinator = server->coordinator();
  ctx->access = server->access_control();
  ctx->stmt_size = options.query_stmt_size > 0 ? options.query_stmt_size : FLAGS_query_stmt_size;
  ctx->max_limit = static_cast<size_t>(std::max(1, FLAGS_queries_max_limit));
  ctx->www_dir = options.www_dir.empty() ? FLAGS_www_dir : options.www_dir;
  ctx->assets = ctx->www_dir.empty() ? EmbeddedAssets() : LoadAssets(ctx->www_dir);
  if (!ctx->assets.contains("queries.html")) {
    LOG(WARNING) << "Debug pages: no queries.html in "
                 << (ctx->www_dir.empty() ? "the compiled-in assets" : "--www_dir " + ctx->www_dir)
                 << "; /queries will answer 500 (JSON endpoints work)";
  }
  return ctx;
}

}  // namespace

void RegisterDebugPages(const debug_pages::Options& options, CoordinatorServer* server) {
  Ctx ctx = MakeContext(options, server);
  Webserver* web = server->webserver();
  auto bind = [ctx](void (*fn)(const Ctx&, HttpRequest&, ResponseCallback)) {
    return [ctx, fn](HttpRequest& req, ResponseCallback respond) {
      fn(ctx, req, std::move(respond));
    };
  };
  for (http::verb v : {http::verb::get, http::verb::post, http::verb::put, http::verb::delete_,
                       http::verb::patch, http::verb::options}) {
    web->RegisterHandler(v, "/", bind(HandleRoot));
  }
  web->RegisterHandler(http::verb::get, "/healthz", bind(HandleHealthz));
  web->RegisterHandler(http::verb::get, "/varz", bind(HandleVarz));
  web->RegisterHandler(http::verb::get, "/metrics", bind(HandleMetrics));
  web->RegisterHandler(http::verb::get, "/queries", bind(HandleQueries));
  web->RegisterHandler(http::verb::get, "/query_statement", bind(HandleQueryStatement));
  web->RegisterHandler(http::verb::get, "/query_detail", bind(HandleQueryDetail));
  web->RegisterHandler(http::verb::get, "/query_plan", bind(HandleQueryPlan));
  web->RegisterHandler(http::verb::post, "/cancel_query", bind(HandleCancel));
  web->RegisterHandler(http::verb::get, "/www/", bind(HandleAsset));
}

}  // namespace qr
