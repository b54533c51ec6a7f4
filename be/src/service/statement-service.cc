#include "service/statement-service.h"

#include <charconv>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include "cluster/forward-auth.h"
#include "runtime/json-encoding.h"
#include "service/protocol-json.h"
#include "service/version.h"
#include "http/http-message.h"

DECLARE_int32(query_stmt_size);

namespace qr {

namespace http = boost::beast::http;

namespace {

HttpResponse NotFoundText(const std::string& what) { return HttpResponse::Text(404, what + "\n"); }

bool IsBlank(const std::string& s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ';') return false;
  }
  return true;
}

/// Splits "/v1/statement/{queued|executing}/{id}/{slug}/{token}".
bool ParseStatementPath(std::string_view path, UniqueId* id, std::string_view* slug,
                        int64_t* token) {
  constexpr std::string_view kPrefix = "/v1/statement/";
  if (path.substr(0, kPrefix.size()) != kPrefix) return false;
  path.remove_prefix(kPrefix.size());
  std::string_view parts[4];
  for (int i = 0; i < 4; ++i) {
    size_t slash = path.find('/');
    if ((i < 3) != (slash != std::string_view::npos)) return false;
    parts[i] = path.substr(0, slash);
    if (i < 3) path.remove_prefix(slash + 1);
  }
  if (parts[0] != "queued" && parts[0] != "executing") return false;
  if (!ParseId(parts[1], id).ok()) return false;
  *slug = parts[2];
  const char* end = parts[3].data() + parts[3].size();
  auto [ptr, ec] = std::from_chars(parts[3].data(), end, *token);
  return ec == std::errc() && ptr == end && *token >= 0 && !parts[3].empty();
}

/// One long-poll GET of a nextUri, alive until it has answered. Fetch attempts are serialized
/// by 'lock_': the first from the handler, later ones from the waiter (called by an executor
/// thread when a page or state change arrives) or from the maxWait timer (an I/O thread).
/// Lock order: 'lock_' is taken first: an attempt calls QueryCoordinator::Fetch() under it
/// (which takes the coordinator's and the request's locks, see query-coordinator.h). The
/// answer is rendered and 'respond_' called after 'lock_' is released; the waiter and the
/// timer take 'lock_' only after the coordinator has released its locks.
class PendingFetch : public std::enable_shared_from_this<PendingFetch> {
 public:
  /// A retry refused by --max_page_retries is answered after 'refusal_delay'.
  PendingFetch(QueryCoordinator* coord, ClientRequestStatePtr req, int64_t token,
               ResultsUris uris, ResponseCallback respond, boost::asio::io_context& io,
               std::chrono::milliseconds refusal_delay)
      : coord_(coord), req_(std::move(req)), token_(token), uris_(std::move(uris)),
        respond_(std::move(respond)), refusal_delay_(refusal_delay), timer_(io) {}

  void Start(std::chrono::milliseconds max_wait) {
    std::optional<Answer> answer;
    {
      MutexLock l(&lock_);
      answer = TryLocked(max_wait.count() > 0);
      if (!answer) {
        timer_.expires_after(max_wait);
        timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
          if (!ec) self->OnTimeout();
        });
      }
    }
    if (answer) Respond(std::move(*answer));
  }

 private:
  /// What one attempt fetched, to answer with once 'lock_' is released.
  struct Answer {
    ClientRequestState::FetchOutcome outcome;
    QueryPage page;
  };

  void OnWake() {
    std::optional<Answer> answer;
    {
      MutexLock l(&lock_);
      if (!done_) answer = TryLocked(true);
    }
    if (answer) Respond(std::move(*answer));
  }

  void OnTimeout() {
    std::optional<Answer> answer;
    {
      MutexLock l(&lock_);
      if (done_) return;
      if (waiter_id_ != 0) req_->RemoveWaiter(waiter_id_);
      answer = TryLocked(false);
    }
    if (answer) Respond(std::move(*answer));
  }

  /// The answer if there is one now (then this fetch is done), else nullopt with a waiter
  /// registered.
  std::optional<Answer> TryLocked(bool may_wait) QR_REQUIRES(lock_) {
    Answer answer;
    uint64_t waiter_id = 0;
    std::weak_ptr<PendingFetch> weak = weak_from_this();
    auto waiter = [weak] {
      if (auto self = weak.lock()) self->OnWake();
    };
    answer.outcome = coord_->Fetch(req_, token_, may_wait, waiter, &answer.page, &waiter_id);
    if (answer.outcome == ClientRequestState::FetchOutcome::kWait) {
      waiter_id_ = waiter_id;
      return std::nullopt;
    }
    done_ = true;
    timer_.cancel();
    return answer;
  }

  /// Renders 'answer' and hands it to the webserver. Called once, with no lock held.
  void Respond(Answer answer) QR_EXCLUDES(lock_) {
    HttpResponse resp;
    const std::string what =
        "Token " + std::to_string(token_) + " of query " + PrintId(req_->query_id());
    switch (answer.outcome) {
      case ClientRequestState::FetchOutcome::kPage:
        RenderQueryResults(*req_, answer.page, uris_, &resp);
        break;
      case ClientRequestState::FetchOutcome::kTooManyRetries:
        resp = HttpResponse::Text(
            429, what + " was already answered again " +
                     std::to_string(coord_->options().max_page_retries) +
                     " times, the most for one page (--max_page_retries); fetch its nextUri\n");
        resp.headers.emplace_back(
            "Retry-After", std::to_string(std::max<int64_t>(
                               1, (refusal_delay_.count() + 999) / 1000)));
        if (refusal_delay_.count() > 0) {
          // A client retrying in a loop makes one request per connection per delay, not as
          // many as the I/O threads can answer. The timer's handler holds this fetch; no
          // thread waits.
          MutexLock l(&lock_);
          timer_.expires_after(refusal_delay_);
          timer_.async_wait([self = shared_from_this(), resp = std::move(resp)](
                                const boost::system::error_code&) mutable {
            self->respond_(std::move(resp));
          });
          return;
        }
        break;
      case ClientRequestState::FetchOutcome::kGone:
        resp = HttpResponse::Text(410, what + " is gone\n");
        break;
      default:
        resp = NotFoundText(what + " does not exist");
        break;
    }
    respond_(std::move(resp));
  }

  QueryCoordinator* const coord_;
  const ClientRequestStatePtr req_;
  const int64_t token_;
  const ResultsUris uris_;
  const ResponseCallback respond_;
  const std::chrono::milliseconds refusal_delay_;
  Mutex lock_;
  boost::asio::steady_timer timer_ QR_GUARDED_BY(lock_);
  bool done_ QR_GUARDED_BY(lock_) = false;
  uint64_t waiter_id_ QR_GUARDED_BY(lock_) = 0;
};

}  // namespace

StatementService::StatementService(Options options, QueryCoordinator* coordinator,
                                   Webserver* webserver, const AccessControl* access)
    : options_(std::move(options)),
      coordinator_(coordinator),
      webserver_(webserver),
      access_(access),
      start_time_(std::chrono::steady_clock::now()) {}

void StatementService::RegisterHandlers() {
  auto bind = [this](void (StatementService::*fn)(HttpRequest&, ResponseCallback)) {
    return [this, fn](HttpRequest& req, ResponseCallback respond) {
      (this->*fn)(req, std::move(respond));
    };
  };
  webserver_->RegisterHandler(http::verb::post, "/v1/statement", bind(&StatementService::HandleSubmit));
  webserver_->RegisterHandler(http::verb::get, "/v1/statement/", bind(&StatementService::HandleStatementGet));
  webserver_->RegisterHandler(http::verb::delete_, "/v1/statement/", bind(&StatementService::HandleStatementDelete));
  // A GET of a nextUri advances the query's cursor: a HEAD must not (405, Allow: GET, DELETE).
  webserver_->DisallowHead("/v1/statement/");
  webserver_->RegisterHandler(http::verb::get, "/v1/info", bind(&StatementService::HandleInfo));
  webserver_->RegisterHandler(http::verb::get, "/v1/info/state", bind(&StatementService::HandleInfoState));
  webserver_->RegisterHandler(http::verb::get, "/v1/query", bind(&StatementService::HandleQueryList));
  webserver_->RegisterHandler(http::verb::get, "/v1/query/", bind(&StatementService::HandleQueryGet));
  webserver_->RegisterHandler(http::verb::delete_, "/v1/query/", bind(&StatementService::HandleQueryDelete));
}

std::string StatementService::BaseUri(const HttpRequest& req) const {
  std::string scheme = req.secure ? "https" : "http";
  // Forwarded by another member: the scheme the client used there (the Host is the client's).
  if (!req.Header(kForwardedByHeader).empty() && req.Header(kForwardedProtoHeader) == "https") {
    scheme = "https";
  }
  std::string_view host = req.Header("Host");
  if (options_.trust_forwarded_headers) {
    std::string_view fwd_host = req.Header("X-Forwarded-Host");
    std::string_view fwd_proto = req.Header("X-Forwarded-Proto");
    if (!fwd_host.empty()) host = fwd_host;
    if (fwd_proto == "https") scheme = "https";
  }
  if (!req.absolute_authority.empty() && host.empty()) host = req.absolute_authority;
  if (!IsSafeAuthority(host)) {
    // Configured before the server bound its port: ":0" means "the port picked at Start()".
    std::string fallback = options_.fallback_authority;
    if (fallback.ends_with(":0")) {
      fallback.replace(fallback.size() - 1, 1, std::to_string(webserver_->port()));
    }
    return scheme + "://" + fallback;
  }
  return scheme + "://" + std::string(host);
}

void StatementService::HandleSubmit(HttpRequest& req, ResponseCallback respond) {
  if (IsBlank(req.body)) {
    respond(HttpResponse::Text(400, "SQL statement is empty: send the SQL text as the POST body\n"));
    return;
  }
  SessionInfo session;
  Principal principal = access_->Identify(req);
  session.user = std::move(principal.user);
  session.principal = std::move(principal.authenticated);
  session.sees_all_queries = !access_->authentication_enabled() || principal.admin;
  session.client_address = req.remote_address;
  if (session.user.empty()) session.user = options_.default_user;
  if (session.user.empty()) {
    HttpResponse resp = HttpResponse::Text(
        401, "No user: send the X-Trino-User (or X-Presto-User) header or Basic credentials\n");
    resp.headers.emplace_back("WWW-Authenticate", "Basic realm=\"coordinatord\"");
    respond(std::move(resp));
    return;
  }
  // A user whose statements keep failing at once gets no more of the I/O threads' time while
  // others wait (checked before any parsing: the refusal must cost less than the statement).
  if (coordinator_->failure_throttle().Throttled(session.user) &&
      coordinator_->OtherUsersInFlight(session.user)) {
    RefuseThrottled(session.user, std::move(respond));
    return;
  }
  session.presto_headers = UsesPrestoHeaders(req);
  session.source = ProtocolHeader(req, "Source");
  session.catalog = ProtocolHeader(req, "Catalog");
  session.schema = ProtocolHeader(req, "Schema");
  session.client_info = ProtocolHeader(req, "Client-Info");
  session.client_tags = ClientTags(req);
  if (session.client_tags.size() > static_cast<size_t>(options_.max_session_properties)) {
    respond(HttpResponse::Text(
        400, "Too many client tags in X-Trino-Client-Tags: at most " +
                 std::to_string(options_.max_session_properties) +
                 " are accepted per query (--max_session_properties)\n"));
    return;
  }
  const size_t max_items = static_cast<size_t>(options_.max_session_properties);
  for (const std::string& refused :
       {ParseSessionHeaders(req, &session, max_items),
        ParsePreparedStatementHeaders(req, &session, max_items)}) {
    if (!refused.empty()) {
      respond(HttpResponse::Text(400, refused + "\n"));
      return;
    }
  }
  session.max_prepared_statements = static_cast<size_t>(options_.max_session_properties);
  size_t header_bytes = req.method_string.size() + req.target.size() + 12;  // request line
  for (const auto& field : req.headers) {
    header_bytes += field.name_string().size() + field.value().size() + 4;  // ": ", CRLF
  }
  session.header_bytes_left =
      header_bytes < options_.max_header_bytes ? options_.max_header_bytes - header_bytes : 0;
  // The statement text moves into one shared immutable buffer: never copied again.
  auto statement = std::make_shared<const std::string>(std::move(req.body));
  ClientRequestStatePtr state =
      coordinator_->Submit(std::move(statement), std::move(session));
  HttpResponse resp;
  RenderSubmitted(*state, ResultsUris{BaseUri(req)}, &resp);
  respond(std::move(resp));
}

void StatementService::RefuseThrottled(const std::string& user, ResponseCallback respond) {
  FailureThrottle& throttle = coordinator_->failure_throttle();
  throttle.CountRefused();
  const auto rate = static_cast<int64_t>(throttle.rate_per_s());
  const QueryError error = QueryError::QueueFull(
      "Too many failed queries: user " + QuoteForError(user, 120) + " had more than " +
      std::to_string(rate) + " failed queries in one second while other users have queries " +
      "in flight (--max_failed_queries_per_user_per_s=" + std::to_string(rate) +
      "); submit again later");
  HttpResponse resp;
  resp.status = 429;
  resp.content_type = "application/json";
  resp.headers.emplace_back(
      "Retry-After",
      std::to_string(std::max<int64_t>(1, (options_.throttled_answer_delay.count() + 999) / 1000)));
  resp.body = "{\"stats\":{\"state\":\"FAILED\"},\"error\":";
  AppendErrorJson(error, &resp.body);
  resp.body += ",\"warnings\":[]}";
  if (options_.throttled_answer_delay.count() <= 0) {
    respond(std::move(resp));
    return;
  }
  // Held by its own completion handler: no thread waits; the connection stays busy.
  auto timer = std::make_shared<boost::asio::steady_timer>(webserver_->io_context());
  timer->expires_after(options_.throttled_answer_delay);
  timer->async_wait([timer, resp = std::move(resp), respond = std::move(respond)](
                        const boost::system::error_code&) mutable { respond(std::move(resp)); });
}

void StatementService::HandleStatementGet(HttpRequest& req, ResponseCallback respond) {
  UniqueId id;
  std::string_view slug;
  int64_t token = 0;
  if (!ParseStatementPath(req.path, &id, &slug, &token)) {
    respond(NotFoundText("Not a statement URI: " + QuoteForError(req.path, 120)));
    return;
  }
  std::chrono::milliseconds max_wait = options_.default_max_wait;
  bool has_max_wait = false;
  std::string max_wait_text = req.QueryParam("maxWait", &has_max_wait);
  const bool max_wait_ok = !has_max_wait || ParseDuration(max_wait_text, &max_wait);
  max_wait = std::min(max_wait, options_.max_max_wait);
  // Another member's query: the owner answers (a bad maxWait too).
  if (Forwarded(req, id, max_wait_ok ? max_wait : options_.default_max_wait, /*results=*/true,
                respond)) {
    return;
  }
  ClientRequestStatePtr state = FindAccessible(req, id);
  if (state == nullptr || !state->SlugMatches(slug)) {
    respond(NotFoundText("Query not found: " + PrintId(id)));
    return;
  }
  if (!max_wait_ok) {
    respond(HttpResponse::Text(400, "Invalid maxWait " + QuoteForError(max_wait_text) +
                                        ": expected a duration such as 1s or 500ms\n"));
    return;
  }
  auto op = std::make_shared<PendingFetch>(coordinator_, std::move(state), token,
                                           ResultsUris{BaseUri(req)}, std::move(respond),
                                           webserver_->io_context(),
                                           options_.throttled_answer_delay);
  op->Start(max_wait);
}

void StatementService::HandleStatementDelete(HttpRequest& req, ResponseCallback respond) {
  UniqueId id;
  std::string_view slug;
  int64_t token = 0;
  if (!ParseStatementPath(req.path, &id, &slug, &token)) {
    respond(NotFoundText("Not a statement URI: " + QuoteForError(req.path, 120)));
    return;
  }
  if (Forwarded(req, id, std::chrono::milliseconds(0), /*results=*/false, respond)) return;
  ClientRequestStatePtr state = FindAccessible(req, id);
  if (state == nullptr) {
    // Gone (expired, or fetched to its end), or another user's (answered alike): nothing to
    // cancel. 204 as Trino answers and as DELETE /v1/query/{id} does: a client's cancel of a
    // query that ended meanwhile is no error (trino-python-client raises on anything else).
    respond(HttpResponse::Text(204, ""));
    return;
  }
  if (!state->SlugMatches(slug)) {
    respond(NotFoundText("Query not found: " + PrintId(id)));
    return;
  }
  // OK for a finished query too: DELETE is idempotent.
  (void)coordinator_->Cancel(id, access_->Identify(req).Describe() + " from " +
                                     req.remote_address + " (DELETE of its nextUri)");
  respond(HttpResponse::Text(204, ""));
}

bool StatementService::Forwarded(HttpRequest& req, const UniqueId& id,
                                 std::chrono::milliseconds wait, bool results,
                                 ResponseCallback& respond) {
  if (forwarder_ == nullptr || coordinator_->Find(id) != nullptr) return false;
  Forwarder::GoneRenderer gone;
  if (results) {
    gone = [id, uris = ResultsUris{BaseUri(req)}](const std::string& message) {
      HttpResponse resp;
      RenderFailedElsewhere(id, QueryError::RemoteHostGone(message), uris, &resp);
      return resp;
    };
  } else {
    gone = [id](const std::string& message) {
      return FailedElsewhereJson(id, QueryError::RemoteHostGone(message));
    };
  }
  return forwarder_->MaybeForward(id, req, wait, gone, webserver_->io_context(), respond);
}

ClientRequestStatePtr StatementService::FindAccessible(const HttpRequest& req,
                                                       const UniqueId& id) const {
  ClientRequestStatePtr state = coordinator_->Find(id);
  if (state == nullptr || !access_->MayAccess(access_->Identify(req), *state)) return nullptr;
  return state;
}

void StatementService::HandleInfo(HttpRequest& req, ResponseCallback respond) {
  double uptime_m = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                  start_time_).count() / 60.0;
  char uptime[32];
  snprintf(uptime, sizeof(uptime), "%.2fm", uptime_m);
  std::string body = "{\"nodeVersion\":{\"version\":\"" QR_FULL_VERSION "\"},\"environment\":";
  AppendJsonString(options_.environment, &body);
  body += ",\"coordinator\":true,\"starting\":false,\"uptime\":\"";
  body += uptime;
  body += "\"}";
  respond(HttpResponse::Json(200, std::move(body)));
}

void StatementService::HandleInfoState(HttpRequest& req, ResponseCallback respond) {
  respond(HttpResponse::Json(
      200, coordinator_->shutting_down() ? "\"SHUTTING_DOWN\"" : "\"ACTIVE\""));
}

}  // namespace qr
