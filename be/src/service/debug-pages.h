#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "service/queries-list.h"

namespace qr {

class ClientRequestState;
class CoordinatorServer;
class QueryCoordinator;

/// The operator's pages of coordinatord: GET / (index), /queries (HTML) and /queries?json,
/// /query_statement (a statement's full text), POST /cancel_query, /metrics (Prometheus),
/// /healthz, /varz, and the static assets of be/www (compiled in) under /www/.
///
/// The pages never hold a registry shard lock while they are built: listings come from the
/// registry's Snapshot() (via QueryCoordinator::InFlight()) and the query log's copy.
/// Untrusted text (statements, user names, sources, error messages) only ever leaves as JSON
/// or text/plain; the HTML page renders it with textContent.
/// Thread-safety: handlers run concurrently on the webserver's I/O threads; the loaded assets
/// are immutable after registration.
namespace debug_pages {
/// Who may see and cancel what is decided by the server's AccessControl (--admin_users).
struct Options {
  /// Listings truncate statements to this many characters; 0: the --query_stmt_size flag.
  int query_stmt_size = 0;
  /// Directory of the page assets (queries.html, queries.js, style.css); empty: --www_dir,
  /// whose default (empty) is the copy of be/www compiled into the binary.
  std::string www_dir;
};

/// The body of GET /queries?json: summary counts, then the in-flight queries and one page of
/// the completed queries (the log's and the query history's: SelectCompleted()), each only
/// the queries of users 'visible' accepts (all when it is empty; the
/// summary's totals are server-wide) and 'params' selects, in its order, at most
/// 'params.limit' of each; 'next_cursor' continues the completed list. Statements are cut to
/// 'stmt_size' characters. In a cluster (docs/operations.md#cluster), 'scope' ("local" or,
/// for a member's part of the cluster view, "member") is added as "scope", and with
/// 'row_cursors' each row carries its position ("cursor") for MergeQueriesPages().
std::string RenderQueriesJson(
    const QueryCoordinator& coordinator, int stmt_size,
    const std::function<bool(std::string_view user)>& visible = {},
    const QueryListParams& params = {}, std::string_view scope = {}, bool row_cursors = false);

/// The body of GET /query_detail?json: one query in full (statement, timeline, counters,
/// error with its position, session, who canceled). The caller checked access.
std::string RenderQueryDetailJson(const ClientRequestState& req);

/// The body of GET /metrics in the Prometheus text exposition format (version 0.0.4).
std::string RenderMetrics(CoordinatorServer* server);

/// "2024-05-01T12:34:56.789Z".
std::string FormatIsoTime(std::chrono::system_clock::time_point t);

/// The leading part of 's' holding at most 'max_chars' characters (UTF-8 code points, stepped
/// by Utf8CharLength()), never cutting a character in two.
std::string_view TruncateChars(std::string_view s, size_t max_chars);
/// Characters in 's': UTF-8 code points, each maximal ill-formed subpart (a stray byte, a
/// truncated sequence) counting as one, as the JSON encoder replaces each with one U+FFFD.
size_t CountChars(std::string_view s);
}  // namespace debug_pages

/// Registers the debug pages' handlers on 'server''s webserver. Call before it starts.
void RegisterDebugPages(const debug_pages::Options& options, CoordinatorServer* server);

}  // namespace qr
