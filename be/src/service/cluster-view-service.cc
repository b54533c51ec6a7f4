// The handlers of the cluster view (issue 19 item 3): a member's part of
// system.runtime.queries for another's fan-out, and the cluster-wide /queries?json.

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/verb.hpp>

#include "service/cluster-queries.h"
#include "service/coordinator-server.h"
#include "service/debug-pages.h"
#include "service/version.h"

namespace qr {
namespace {

std::string Html(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

/// A link only for http(s) URIs: a member key is written by whoever can write to etcd.
std::string UriCell(const std::string& uri) {
  if (uri.rfind("http://", 0) != 0 && uri.rfind("https://", 0) != 0) return Html(uri);
  return "<a href=\"" + Html(uri) + "/\">" + Html(uri) + "</a>";
}

std::string MemberRow(const ClusterMember& m, bool self, std::string_view state) {
  std::string start = "";
  if (m.start_time_ms > 0) {
    start = debug_pages::FormatIsoTime(std::chrono::system_clock::time_point(
        std::chrono::milliseconds(m.start_time_ms)));
  }
  return "<tr><td class=\"num\">" + std::to_string(m.id) + "</td><td>" + UriCell(m.uri) +
         "</td><td>" + Html(m.version) + "</td><td>" + start + "</td><td>" + Html(state) +
         (self ? " (this member)" : "") + "</td></tr>\n";
}

}  // namespace

std::string RenderMembersHtml(const Membership& membership) {
  const Membership::Snapshot s = membership.GetSnapshot();
  std::string out = "<h2>Cluster members</h2>\n<table class=\"queries\" id=\"members\"><thead>"
                    "<tr><th>Id</th><th>URI</th><th>Version</th><th>Started</th><th>State</th>"
                    "</tr></thead><tbody>\n";
  bool self_listed = false;
  for (const ClusterMember& m : s.members) {
    const bool self = m.id == s.member_id;
    self_listed = self_listed || self;
    out += MemberRow(m, self, self ? ClusterStateName(s.state) : "live");
  }
  if (!self_listed) {
    ClusterMember m;
    m.id = s.member_id;
    m.version = QR_VERSION;
    out += MemberRow(m, true, ClusterStateName(s.state));
  }
  out += "</tbody></table>\n<p class=\"muted\">As this member's etcd watch last saw them";
  if (!s.last_error.empty()) out += "; last etcd error: " + Html(s.last_error);
  out += ".</p>\n";
  return out;
}

void RegisterClusterViewHandlers(CoordinatorServer* server) {
  server->webserver()->RegisterHandler(
      boost::beast::http::verb::get, std::string(kClusterRuntimeQueriesPath),
      [server](HttpRequest& req, ResponseCallback respond) {
        const AccessControl* access = server->access_control();
        const Principal principal = access->Identify(req);
        SqlViewer viewer{principal.user, !access->authentication_enabled() || principal.admin};
        HttpResponse r = HttpResponse::Json(
            200, RuntimeRowsToJson(server->runtime_tables()->LocalQueries(viewer)));
        respond(std::move(r));
      });
}

namespace debug_pages {

void AnswerClusterQueries(CoordinatorServer* server, const HttpRequest& req,
                          const QueryListParams& params, std::string local,
                          ResponseCallback respond) {
  ClusterView* view = server->cluster_view();
  MemberAnswer self;
  self.member = view->Self();
  self.self = true;
  self.ok = true;
  self.response.body = std::move(local);
  view->FanOut(SubRequestOf(req), server->webserver()->io_context(),
               [self = std::move(self), params, respond = std::move(respond)](
                   std::vector<MemberAnswer> others) {
                 others.insert(others.begin(), self);
                 HttpResponse r = HttpResponse::Json(
                     200, MergeQueriesPages(params, ParseMemberPages(std::move(others))));
                 r.headers.emplace_back("X-Content-Type-Options", "nosniff");
                 r.headers.emplace_back("Cache-Control", "no-store");
                 respond(std::move(r));
               });
}

}  // namespace debug_pages
}  // namespace qr
