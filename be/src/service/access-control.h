#pragma once

#include <string>
#include <string_view>
#include <unordered_set>

#include "http/webserver.h"

namespace qr {

class ClientRequestState;

/// Who a request acts for, as the service handlers see it.
struct Principal {
  /// The protocol user: the X-Trino-User/X-Presto-User header, else (with authentication) the
  /// authenticated user, else (without) the Basic user name. Empty when none is named.
  std::string user;
  /// The user may see and cancel every query (--admin_users; with authentication on, decided
  /// by the authenticated user, not by the header).
  bool admin = false;
  /// With authentication: the authenticated user (who may act as another 'user' if admin).
  std::string authenticated;

  /// For audit lines: "user 'bob'", or "user 'bob' (authenticated as 'admin')" when the
  /// authenticated user acts as another; every name quoted and escaped (QuoteForError).
  std::string Describe() const;
};

/// The audit form of a user acting through 'principal' (empty: no authentication).
std::string DescribeUser(std::string_view user, std::string_view principal);

/// The access rules of coordinatord's protocol endpoints and debug pages.
///
/// Without authentication (the default) every query is visible to everyone and the user is
/// self-asserted, as before. With authentication (--auth_password_file) every request is
/// authenticated by the webserver first (BasicAuthenticator), a protocol user header must name
/// the authenticated user unless that user is an admin (else 403), and a non-admin sees,
/// fetches and cancels only queries whose user is their own; other queries are answered as if
/// they did not exist.
/// Thread-safety: immutable after construction; all methods are thread-safe.
class AccessControl {
 public:
  AccessControl(bool authentication_enabled, std::string_view admin_users);

  bool authentication_enabled() const { return authentication_enabled_; }
  bool IsAdmin(std::string_view user) const { return admins_.contains(std::string(user)); }

  /// The principal of 'req' (see Principal). With authentication on, 'req' was authenticated.
  Principal Identify(const HttpRequest& req) const;
  /// With authentication on: false with a 403 in '*denied' when the request's user header
  /// names someone other than the authenticated user and that user is not an admin.
  bool CheckUserHeader(const HttpRequest& req, HttpResponse* denied) const;
  /// Whether 'req' names its user in a protocol header (X-Trino-User or X-Presto-User). A
  /// cross-site HTML form cannot send a custom header, so state-changing debug-page requests
  /// require one (browsers attach cached Basic credentials to cross-site form posts).
  static bool HasUserHeader(const HttpRequest& req);
  /// Whether 'p' may see, fetch and cancel 'query'. Always true without authentication.
  bool MayAccess(const Principal& p, const ClientRequestState& query) const;
  /// The same for a query of 'user' (one of the history, which keeps no request).
  bool MayAccessUser(const Principal& p, std::string_view user) const;

 private:
  const bool authentication_enabled_;
  const std::unordered_set<std::string> admins_;
};

/// "a, b ,c" -> {"a", "b", "c"} (spaces trimmed, empty items dropped).
std::unordered_set<std::string> ParseUserList(std::string_view list);

}  // namespace qr
