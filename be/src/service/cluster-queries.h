#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/cluster-view.h"
#include "runtime/system-tables.h"
#include "service/queries-list.h"

/// The merge of the members' answers of a cluster-wide listing (issue 19 item 3,
/// docs/architecture.md "The cluster view"): pure functions, unit-tested.

namespace qr {
namespace debug_pages {

/// One member's /queries?json page (rendered with row cursors) or why there is none.
struct MemberQueriesPage {
  ClusterMember member;
  bool self = false;
  bool ok = false;
  std::string error;
  nlohmann::ordered_json page;  // when ok
};

/// Parses the members' answers: one that is not a /queries?json page is marked failed.
std::vector<MemberQueriesPage> ParseMemberPages(std::vector<MemberAnswer> answers);

/// The cluster-wide /queries?json page from every member's page for the same 'params' (each
/// sorted and paged alike, rows carrying "cursor"). Each list is merged in the requested
/// order and cut to 'params.limit'. The completed list's cursor is a position in one total
/// order over all members (sort key, then query id, ids being unique across members), so the
/// same cursor goes to every member: the next cursor is the last row kept or, when a member
/// stopped early (it has more rows, or its text search stopped at its scan bound), the
/// earliest such member's position, whichever comes first, and rows past it wait for the
/// next page. Counts and the summary are sums over the members that answered; "members"
/// lists every member with "ok" and, when not, "error". The rows' "cursor" is dropped.
std::string MergeQueriesPages(const QueryListParams& params,
                              const std::vector<MemberQueriesPage>& pages);

/// The JSON object of a member in "members" (id, uri, self, ok, error).
nlohmann::ordered_json MemberJson(const ClusterMember& member, bool self, bool ok,
                                  const std::string& error);

}  // namespace debug_pages

class CoordinatorServer;

/// Where a member answers its part of system.runtime.queries for another's fan-out: a JSON
/// array of the rows the request's user may see (RuntimeRowsToJson()), this member's only.
inline constexpr std::string_view kClusterRuntimeQueriesPath = "/v1/cluster/runtime_queries";

/// The members section of the debug index page '/': one row per live member as the watch last
/// saw it (id, URI as a link, version, start time, state), this member marked, and this member
/// with its cluster state when it is not in that view.
std::string RenderMembersHtml(const Membership& membership);

/// Registers kClusterRuntimeQueriesPath. Call before Webserver::Start().
void RegisterClusterViewHandlers(CoordinatorServer* server);

namespace debug_pages {

/// Answers a cluster-wide GET /queries?json: 'local' is this member's page (rendered with row
/// cursors) for 'params'; the other members are asked for theirs (the same target) on this
/// I/O thread's io_context, and 'respond' gets MergeQueriesPages() once all answered or the
/// view's deadline passed.
void AnswerClusterQueries(CoordinatorServer* server, const HttpRequest& req,
                          const QueryListParams& params, std::string local,
                          ResponseCallback respond);

}  // namespace debug_pages

/// system.runtime.queries' rows across the hop (GET /v1/cluster/runtime_queries).
std::string RuntimeRowsToJson(const std::vector<RuntimeQueryRow>& rows);
/// False when 'json' is not RuntimeRowsToJson()'s.
bool RuntimeRowsFromJson(const std::string& json, std::vector<RuntimeQueryRow>* rows);

}  // namespace qr
