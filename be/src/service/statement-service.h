#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "cluster/cluster-view.h"
#include "cluster/forwarder.h"
#include "service/access-control.h"
#include "service/query-coordinator.h"
#include "http/webserver.h"

namespace qr {

/// The Trino client REST protocol (docs/protocol.md) on top of a QueryCoordinator:
/// POST /v1/statement, GET/DELETE of nextUri, /v1/info, /v1/info/state, /v1/query[/{id}].
///
/// A GET of a nextUri never parks a thread: when no page is ready it registers a waiter on the
/// request and an Asio timer for 'maxWait'; whichever fires first completes the response.
/// With authentication on, a non-admin only reaches their own queries (AccessControl): someone
/// else's query is answered exactly like an unknown one, nextUri included.
/// Thread-safety: handlers run concurrently on the webserver's I/O threads; all state is in the
/// coordinator.
class StatementService {
 public:
  struct Options {
    /// User when a request names none (empty: such requests get 401).
    std::string default_user;
    /// Build nextUri from X-Forwarded-Proto/Host (behind a trusted proxy only).
    bool trust_forwarded_headers = false;
    std::chrono::milliseconds default_max_wait{1000};
    std::chrono::milliseconds max_max_wait{10000};
    std::string environment = "qr";
    /// Where the server listens, for nextUri when a request has no usable Host header.
    std::string fallback_authority = "127.0.0.1:8080";
    /// X-Trino-Session properties accepted per query (400 beyond).
    int max_session_properties = 100;
    /// The HTTP server's --max_header_bytes: a PREPARE whose statement would not fit in the
    /// client's next request header fails (SessionInfo::header_bytes_left).
    size_t max_header_bytes = 16 * 1024;
    /// Characters of each statement in the GET /v1/query listing (the full text is at
    /// /v1/query/{id}); 0: --query_stmt_size.
    int list_stmt_size = 0;
    /// A submission refused because its user is out of failed queries (FailureThrottle), and
    /// a retry of an answered page refused by --max_page_retries, are answered after this
    /// long: a client that tries again at once cannot make more than one refused request per
    /// connection per delay.
    std::chrono::milliseconds throttled_answer_delay{1000};
  };

  /// Borrows 'coordinator', 'webserver' and 'access', which must outlive the service.
  StatementService(Options options, QueryCoordinator* coordinator, Webserver* webserver,
                   const AccessControl* access);

  /// Registers every protocol route. Call before Webserver::Start().
  void RegisterHandlers();
  /// In a cluster: follow-ups for other members' queries go through 'forwarder' (borrowed,
  /// outlives the service's handlers). Call before Webserver::Start().
  void set_forwarder(Forwarder* forwarder) { forwarder_ = forwarder; }
  /// In a cluster: GET /v1/query lists every live member's queries (borrowed, outlives the
  /// service's handlers; null: this member's only). Call before Webserver::Start().
  void set_cluster_view(ClusterView* view) { cluster_view_ = view; }

 private:
  void HandleSubmit(HttpRequest& req, ResponseCallback respond);
  void HandleStatementGet(HttpRequest& req, ResponseCallback respond);
  void HandleStatementDelete(HttpRequest& req, ResponseCallback respond);
  void HandleInfo(HttpRequest& req, ResponseCallback respond);
  void HandleInfoState(HttpRequest& req, ResponseCallback respond);
  /// GET /v1/query (query-list-service.cc): this member's list, and in a cluster the others'.
  void HandleQueryList(HttpRequest& req, ResponseCallback respond);
  /// This member's queries that 'req' may see, as a JSON array of QueryInfo.
  std::string LocalQueryList(const HttpRequest& req) const;
  void HandleQueryGet(HttpRequest& req, ResponseCallback respond);
  void HandleQueryDelete(HttpRequest& req, ResponseCallback respond);

  /// Answers a submission of 'user' refused by the failure throttle: 429 with Trino's error
  /// document (QUERY_QUEUE_FULL), after Options::throttled_answer_delay.
  void RefuseThrottled(const std::string& user, ResponseCallback respond);
  /// True when 'req', about query 'id' that this member does not hold, was taken over by the
  /// forwarder (forwarded to its owner, or answered REMOTE_HOST_GONE: a QueryResults document
  /// when 'results', else FailedElsewhereJson()). 'wait': the poll's maxWait.
  bool Forwarded(HttpRequest& req, const UniqueId& id, std::chrono::milliseconds wait,
                 bool results, ResponseCallback& respond);
  /// "http[s]://host:port" for absolute URIs in answers to 'req'.
  std::string BaseUri(const HttpRequest& req) const;
  /// The query 'id' if it exists and 'req' may access it, else nullptr: callers answer both
  /// cases alike, so nobody learns whether someone else's query exists.
  ClientRequestStatePtr FindAccessible(const HttpRequest& req,
                                       const UniqueId& id) const;

  const Options options_;
  QueryCoordinator* const coordinator_;
  Webserver* const webserver_;
  const AccessControl* const access_;
  Forwarder* forwarder_ = nullptr;
  ClusterView* cluster_view_ = nullptr;
  const std::chrono::steady_clock::time_point start_time_;
};

/// Value of X-Trino-<suffix>, else X-Presto-<suffix> (statement-headers.cc, like the
/// functions below).
std::string ProtocolHeader(const HttpRequest& req, const std::string& suffix);
/// True when the request speaks the X-Presto-* family: it has an X-Presto-* header and no
/// X-Trino-* one. Its answers then name their headers X-Presto-* too (X-Presto-Added-Prepare,
/// X-Presto-Set-Session, ...): a Presto client reads only those.
bool UsesPrestoHeaders(const HttpRequest& req);
/// X-Trino-Client-Tags: comma-separated tags, trimmed; empty ones dropped.
std::vector<std::string> SplitClientTags(std::string_view v);
/// The user of a request: X-Trino-User or X-Presto-User, else the user name of Basic
/// authorization, else empty.
std::string RequestUser(const HttpRequest& req);
/// True when 'host' is safe to echo into a URI (host names, IPv4, [IPv6], optional :port).
bool IsSafeAuthority(std::string_view host);
/// Parses a Trino duration ("1s", "500ms", "1.5m", "10.00s"). False if malformed.
bool ParseDuration(std::string_view s, std::chrono::milliseconds* out);
/// Appends the "name=value" items of every X-Trino-Session / X-Presto-Session header of 'req'
/// (comma-separated, names and values trimmed, values URL-decoded as Trino decodes them, '+'
/// a space) to session->properties; empty items are skipped. Returns the text of the 400
/// that answers a malformed header ("" when it parses): an item without '=', a '%' without
/// two hex digits (Trino refuses both), or more than 'max_properties' items.
std::string ParseSessionHeaders(const HttpRequest& req, SessionInfo* session,
                                size_t max_properties = SIZE_MAX);
/// The same for X-Trino-Prepared-Statement / X-Presto-Prepared-Statement ("name=SQL", both
/// URL-encoded with '+' for a space) into session->prepared_statements.
std::string ParsePreparedStatementHeaders(const HttpRequest& req, SessionInfo* session,
                                          size_t max_statements = SIZE_MAX);
/// The client tags of every X-Trino-Client-Tags line (else every X-Presto-Client-Tags one),
/// each SplitClientTags().
std::vector<std::string> ClientTags(const HttpRequest& req);

}  // namespace qr
